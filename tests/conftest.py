"""Shared pytest setup for the perfkit tests and the book tests.

Runs before any test module (and before nbval starts a chapter kernel), so environment
variables set here reach the chapter kernels and the book build too:

- ``MPLBACKEND=Agg``: no display is needed in pytest or in nbval's kernels. The book build
  (tests/test_book.py) keeps Agg: perfkit's figures show themselves as a cell's result.
- ``TRITON_INTERPRET=1`` when there is no CUDA GPU: Triton kernels then run under Triton's
  interpreter on the CPU. It must be set before anything imports triton.
- Tests marked ``gpu`` are skipped unless ``torch.cuda.is_available()``.
- A test that needs a published third-party table (``perfkit.published``) where the published-data
  folder lacks it is skipped, saying how to get the tables (``PublishedDataMissing``); this
  project's machines and CI have the folder, so there every such test runs.
"""

from __future__ import annotations

import os
import sys
import warnings

os.environ["MPLBACKEND"] = "Agg"


from perfkit.devices import cuda_available  # noqa: E402  (imports torch, never triton)

HAS_CUDA = cuda_available()

if not HAS_CUDA:
    if "triton" in sys.modules:
        warnings.warn("triton was imported before tests/conftest.py could set TRITON_INTERPRET=1; "
                      "Triton kernels may not run on the CPU", stacklevel=1)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test stopped by a missing published table is skipped with the reason, not failed."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        from perfkit.published_data import HOW_TO_GET, PublishedDataMissing

        error = call.excinfo.value
        while error is not None and not isinstance(error, PublishedDataMissing):
            error = error.__cause__ or error.__context__
        if error is not None:
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {HOW_TO_GET} ({error})")


def pytest_report_header(config):
    interp = os.environ.get("TRITON_INTERPRET", "unset")
    return (f"perfkit: CUDA GPU {'found' if HAS_CUDA else 'not found'}; "
            f"MPLBACKEND={os.environ['MPLBACKEND']}; TRITON_INTERPRET={interp}")


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every matplotlib figure a test opened (only where pyplot was imported)."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


@pytest.fixture
def forbid_allocation(monkeypatch):
    """``forbid(module, *names)``: calling any of those allocating functions fails the test, so a
    sweep too large for free memory must be refused before it allocates."""
    def no_alloc(*args, **kwargs):
        raise AssertionError("allocated before the size check")

    def forbid(module, *names: str) -> None:
        for name in names:
            monkeypatch.setattr(module, name, no_alloc)

    return forbid


def pytest_collection_modifyitems(config, items):
    from perfkit.published_data import CATALOG, HOW_TO_GET, has_published

    if not all(has_published(name) for name in CATALOG):
        skip_published = pytest.mark.skip(reason=f"needs the published tables: {HOW_TO_GET}")
        for item in items:
            if "published" in item.keywords:
                item.add_marker(skip_published)
    if HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU: torch.cuda.is_available() is False "
                                       "(or torch is not installed)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def short_bench(monkeypatch):
    """Real measurements on a tiny time budget, for tests that check rows, not timings: every
    ``bench`` an experiment calls (its own import, or through ``perfkit.placement.lean_bench``)
    samples for milliseconds."""
    import sys

    from perfkit import timing
    from perfkit.book.registry import REGISTRY

    len(REGISTRY)  # imports every chapter folder's experiments

    original = timing.bench

    def short(fn, **options):
        return original(fn, **{**options, "warmup_s": 0.0, "rep_s": 0.002, "max_time_s": 0.05})

    monkeypatch.setattr(timing, "bench", short)
    for name, module in list(sys.modules.items()):
        if name.startswith("perfkit.") and getattr(module, "bench", None) is original:
            monkeypatch.setattr(module, "bench", short)
