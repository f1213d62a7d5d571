"""Shared pytest setup for the perfkit tests and the book tests.

Runs before any test module (and before nbval starts a chapter kernel), so environment
variables set here reach the chapter kernels and the book build too:

- ``MPLBACKEND=Agg``: no display is needed in pytest or in nbval's kernels. The book build
  (tests/test_book.py) keeps Agg: perfkit's figures show themselves as a cell's result.
- ``TRITON_INTERPRET=1`` when there is no CUDA GPU: Triton kernels then run under Triton's
  interpreter on the CPU. It must be set before anything imports triton.
- Tests marked ``gpu`` are skipped unless ``torch.cuda.is_available()``.
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
    ``bench`` an experiment calls (its own import, or through ``experiments.common.lean_bench``,
    which imports ``perfkit.timing.bench`` when called) samples for milliseconds."""
    import perfkit.experiments as experiments
    from perfkit import timing

    original = timing.bench

    def short(fn, **options):
        return original(fn, **{**options, "warmup_s": 0.0, "rep_s": 0.002, "max_time_s": 0.05})

    monkeypatch.setattr(timing, "bench", short)
    for name in dir(experiments):
        module = getattr(experiments, name)
        if getattr(module, "bench", None) is original:
            monkeypatch.setattr(module, "bench", short)
