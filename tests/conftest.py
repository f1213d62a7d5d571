"""Shared pytest setup for the perfkit tests and the book tests.

Runs before any test module (and before nbval starts a chapter kernel), so environment
variables set here reach the chapter kernels and the book build too:

- ``MPLBACKEND=Agg``: no display is needed in pytest or in nbval's kernels. The book build
  (tests/book/test_book.py) keeps Agg: perfkit's figures show themselves as a cell's result.
- ``TRITON_INTERPRET=1`` when there is no CUDA GPU: Triton kernels then run under Triton's
  interpreter on the CPU. It must be set before anything imports triton.
- ``PERFKIT_CACHE`` points at an empty folder of this session: a device profile the developer saved
  with ``python -m perfkit calibrate`` must not change what the tests (and chapters) compute.
- Tests marked ``gpu`` are skipped unless ``torch.cuda.is_available()``.
- A test that needs a published third-party table (``perfkit.published``) where the published-data
  folder lacks it is skipped, saying how to get the tables (``PublishedDataMissing``); this
  project's machines and CI have the folder, so there every such test runs.
- Tiers: every nbval item (a chapter notebook's cell) and every test marked ``book`` is also marked
  ``slow``, so ``-m "not slow"`` runs no notebook and no book build.
- Each chapter is executed once per run (tests/notebook_cache.py, registered here as a plugin so its
  hooks see the notebook items too): nbval's execution is saved in a jupyter-cache, nbval runs
  first (a pytest-xdist scheduler for ``--dist loadfile``; reordered items without xdist), and the
  book build of tests/book/test_book.py takes the chapters from that cache.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings

os.environ["MPLBACKEND"] = "Agg"
if "PERFKIT_TEST_CACHE" not in os.environ:  # one folder for the session and its pytest-xdist workers
    os.environ["PERFKIT_TEST_CACHE"] = tempfile.mkdtemp(prefix="perfkit-cache-")
os.environ["PERFKIT_CACHE"] = os.environ["PERFKIT_TEST_CACHE"]


from perfkit.devices import cuda_available  # noqa: E402  (imports torch, never triton)

HAS_CUDA = cuda_available()

if not HAS_CUDA:
    if "triton" in sys.modules:
        warnings.warn("triton was imported before tests/conftest.py could set TRITON_INTERPRET=1; "
                      "Triton kernels may not run on the CPU", stacklevel=1)
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

import notebook_cache  # noqa: E402  (tests/ is on sys.path: pytest's pythonpath)


def pytest_configure(config):
    notebook_cache.register(config)


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


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    from perfkit.published_data import CATALOG, HOW_TO_GET, has_published

    for item in items:
        if item.path.suffix == ".ipynb" or item.get_closest_marker("book") is not None:  # not keywords: tests/book/ is one
            item.add_marker(pytest.mark.slow)

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
def short_bench():
    """Real measurements on a tiny time budget, for tests that check rows, not timings: every
    experiment times through the one seam, ``perfkit.placement.timer`` (``lean_bench`` included),
    so one ``placement.use(timer=...)`` block shortens them all. Yields the short timer."""
    from perfkit import placement, timing

    def short(fn, **options):
        return timing.bench(fn, **{**options, "warmup_s": 0.0, "rep_s": 0.002, "max_time_s": 0.05})

    with placement.use(timer=short):
        yield short


class FakeGPU:
    """A pretend H100-SXM, set through the seam (``perfkit.placement.use``): ``"auto"`` resolves to
    ``"cuda"``, the spec measured on is ``spec``, its memory is free, and every timing is ``timing``
    (fixed samples; the timed function never runs). ``calls`` holds each timing's options
    (``device``, ``label``, ``cuda_graph``, ...). Kernel builders allocate on torch's ``"meta"``
    device (``placement.tensor_device``): shapes only, nothing computed; :meth:`stub` replaces the
    few builders that cannot work on meta (torch.compile, CuPy, cuDNN's autograd node names)."""

    def __init__(self, monkeypatch):
        import perfkit as pk
        from perfkit.measurement import Measurement

        self.spec = pk.device_spec("H100-SXM")
        self.timing = Measurement(samples=[1e-3, 1.2e-3, 1.1e-3], first_call_s=0.5)
        self.calls: list[dict] = []
        self._monkeypatch = monkeypatch

    def timer(self, fn, **options):
        self.calls.append(options)
        return self.timing

    def stub(self, module, **fakes) -> None:
        """Replace ``module``'s functions by ``fakes``, for this test (builders that cannot run on meta)."""
        for name, fake in fakes.items():
            self._monkeypatch.setattr(module, name, fake)


@pytest.fixture
def fake_gpu(monkeypatch):
    """Run an experiment's GPU code path here, with nothing on a GPU: a :class:`FakeGPU` in use.
    Only the shape of the rows is checked with it; no number it produces is ever shown."""
    from perfkit import placement

    gpu = FakeGPU(monkeypatch)
    with placement.use(timer=gpu.timer, device="cuda", spec=gpu.spec, tensor_device="meta"):
        yield gpu
