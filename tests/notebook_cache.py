"""One execution of each chapter per test run: nbval's execution, saved for the book build.

nbval (``chapters/*.ipynb``, one pytest item per code cell) is the notebook test. The book build of
tests/book/test_book.py would execute the same chapters again; instead it takes them from a
jupyter-cache that nbval's run filled:

Capture
    Every iopub message nbval's kernel sends while a cell runs is kept (nbval's
    ``RunningKernel.get_message`` and ``execute_cell_input`` are wrapped, which gives each cell's
    ``msg_id``) and handed, cell by cell, to an :class:`nbclient.NotebookClient` that has no kernel
    of its own, through ``process_message``: display updates, ``clear_output``, streams and the
    ipywidgets comm messages become the cell's outputs and ``widget_state`` by the very code that
    executes notebooks in a book build (myst-nb -> jupyter-cache -> nbclient, ``record_timing=False``).
    Cell numbering and ``execute_result`` counts are those nbclient gives (nbval runs cells with
    ``store_history=False``); the kernel's ``language_info`` comes from its ``kernel_info_reply``.

Cache
    When every cell of a notebook passed (none failed, errored or was skipped), the executed
    notebook is stored in this session's jupyter-cache (:func:`jupyter_cache_dir`) under a file
    lock (two pytest-xdist workers write to one SQLite database). What is stored is the paired
    ``.md`` as myst-nb reads it, with nbval's outputs: the hash myst-nb computes for the page then
    matches by construction, and the page keeps the ``.md``'s cell metadata (tags, image alt text).
    A notebook whose ``.ipynb`` code cells or kernelspec differ from its ``.md`` is not stored (the
    build executes the ``.md``). Each notebook nbval finished (stored or not) leaves a small JSON
    record in :func:`runs_dir`; the build waits for those of every notebook in the session.

Order
    With pytest-xdist, the scheduler of :mod:`notebook_order` (``--dist loadfile``) hands out the
    chapter notebooks first, longest first (by the durations the last run saved in pytest's cache,
    else by cell count), and holds back ``tests/book/test_book.py`` until every notebook is done.
    "Done" has to allow for xdist's one-item look-ahead: a worker runs the last item it was given
    only once it is given another or told to shut down. So the held file is released when every
    notebook item has completed except, at most, the one last item a worker is blocked on; it goes
    to the least busy worker, workers with nothing left are shut down (their last cell then runs),
    and the build fixture waits for those notebooks' records before it builds. Without xdist, the
    items are reordered: notebooks first, test_book.py last.

Everything lives in one folder per session (``$PERFKIT_TEST_CACHE/nbval-*``, named by
``$PERFKIT_NBVAL_CACHE`` for the xdist workers), removed when the session ends (kept where
``$PERFKIT_KEEP_NBVAL_CACHE`` is set): a chapter's outputs must come from this run's code, never
from an earlier run's.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from notebook_order import BOOK_TESTS, make_scheduler  # tests/ is on sys.path

REPO = Path(__file__).resolve().parent.parent
ENV = "PERFKIT_NBVAL_CACHE"
#: Set (to anything) to keep the session's folder after the session, to look at what was cached.
KEEP_ENV = "PERFKIT_KEEP_NBVAL_CACHE"
PLUGIN_NAME = "perfkit-notebook-cache"
#: pytest's cache key for the seconds each notebook took (the scheduler's "longest first").
DURATIONS_KEY = "perfkit/notebook_seconds"


# --------------------------------------------------------------------------------------------
# Where things are


def session_dir() -> Path | None:
    """This session's folder (None outside a pytest session that registered the plugin)."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def jupyter_cache_dir() -> Path | None:
    folder = session_dir()
    return folder / "jupyter_cache" if folder else None


def runs_dir() -> Path | None:
    folder = session_dir()
    return folder / "runs" if folder else None


def _record_path(notebook: Path) -> Path:
    rel = _rel(notebook)
    return runs_dir() / (rel.replace("/", "__") + ".json")


def _rel(path: Path | str) -> str:
    path = Path(path).resolve()
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        return path.as_posix()


@contextlib.contextmanager
def cache_lock():
    """An exclusive lock on this session's jupyter-cache (fcntl; filelock where there is no fcntl)."""
    lock_path = session_dir() / "cache.lock"
    try:
        import fcntl
    except ImportError:  # not POSIX
        from filelock import FileLock

        with FileLock(str(lock_path)):
            yield
        return
    with open(lock_path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------
# The page as the book build reads it


def _book_md_config():
    """The MyST configuration the book build parses with (only the extensions change how a
    notebook's cells are split)."""
    import yaml
    from myst_parser.config.main import MdParserConfig

    with open(REPO / "_config.yml", encoding="utf-8") as f:
        cfg = yaml.safe_load(f) or {}
    extensions = ((cfg.get("parse") or {}).get("myst_enable_extensions")) or []
    return MdParserConfig(enable_extensions=set(extensions))


def read_page(md: Path):
    """``md`` as myst-nb reads it in a book build (its cells, their metadata, the kernelspec)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    return read_myst_markdown_notebook(md.read_text(encoding="utf-8"), config=_book_md_config(),
                                       add_source_map=True, path=str(md))


def notebook_hash(nb) -> str:
    """The key jupyter-cache (and so myst-nb's cache mode) files ``nb`` under."""
    from jupyter_cache.cache.main import JupyterCacheBase

    return JupyterCacheBase.create_hashed_notebook(None, nb)[1]


# --------------------------------------------------------------------------------------------
# Capture: nbval's kernel messages -> the cell outputs a book build would save


class _NoKernel:
    """The kernel client nbclient's Output-widget mimic would send its state back with. There is no
    kernel to send to here; a notebook that needed it is not cached (the build executes it)."""

    def __init__(self, run: "NotebookRun"):
        self._run = run
        self.session = self
        self.shell_channel = self

    def msg(self, *args, **kwargs):
        return {}

    def send(self, *args, **kwargs):
        self._run.problems.append("an Output widget sent its state back to the kernel (only a live "
                                  "front end can)")


@dataclass
class NotebookRun:
    """One notebook being run by nbval: its outputs, built as the cells finish."""

    path: Path
    nb: Any  # the notebook nbval runs (a copy), receiving the outputs
    language_info: dict | None = None
    problems: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    current: int | None = None  # nbval's cell number (index among code cells) now running
    msg_id: str | None = None
    messages: list[dict] = field(default_factory=list)
    passed: set[int] = field(default_factory=set)
    not_passed: list[str] = field(default_factory=list)
    executed: int = 0

    def __post_init__(self):
        from nbclient import NotebookClient

        # As jupyter-cache's single_nb_execution creates it for myst-nb (record_timing=False).
        self.client = NotebookClient(self.nb, record_timing=False)
        self.client.reset_execution_trackers()
        self.client.kc = _NoKernel(self)
        self.code_cells = [i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]

    # nbval's side
    def begin(self, cell_num: int) -> None:
        self.current, self.msg_id, self.messages = cell_num, None, []

    def on_execute(self, msg_id: str) -> None:
        if self.current is not None:
            self.msg_id = msg_id

    def on_message(self, msg: dict) -> None:
        if self.current is not None:
            self.messages.append(msg)

    def end(self) -> None:
        """The cell nbval ran is over: turn its messages into outputs, as nbclient would."""
        from nbclient.exceptions import CellExecutionComplete

        cell_num, msg_id, messages = self.current, self.msg_id, self.messages
        self.current, self.msg_id, self.messages = None, None, []
        if cell_num is None or cell_num >= len(self.code_cells):
            return
        index = self.code_cells[cell_num]
        cell = self.nb.cells[index]
        if not cell.source.strip():
            return  # nbclient does not execute an empty cell (nothing to show, count unchanged)
        if self.client.skip_cells_with_tag in cell.metadata.get("tags", []):
            self.problems.append(f"cell {cell_num} is tagged {self.client.skip_cells_with_tag!r}: a build "
                                 "skips it, nbval ran it")
            return
        if msg_id is None:
            self.problems.append(f"cell {cell_num}: nbval did not execute it")
            return
        self.executed += 1
        cell.outputs = []
        self.client.clear_before_next_output = False
        complete = False
        for msg in messages:
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue  # as nbclient: only this execution's messages
            try:
                self.client.process_message(msg, cell, index)
            except CellExecutionComplete:
                complete = True
                break
        if not complete:
            self.problems.append(f"cell {cell_num}: the kernel's idle status was not seen")
        # nbclient numbers the executed cells 1, 2, ... (the kernel ran them with store_history=True)
        cell.execution_count = self.executed
        for out in cell.outputs:
            if out.get("output_type") == "execute_result":
                out["execution_count"] = self.executed

    def executed_notebook(self):
        """The notebook with every output, widget state and language_info, as after a build."""
        self.client.set_widgets_metadata()
        if self.language_info:
            self.nb.metadata["language_info"] = self.language_info
        return self.nb


def _write_record(notebook: Path, **fields) -> None:
    folder = runs_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = _record_path(notebook)
    data = {"notebook": _rel(notebook), "page": _rel(notebook.with_suffix(""))} | fields
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, target)


def store(run: NotebookRun | None, notebook: Path, reasons: list[str]) -> dict:
    """Cache ``run``'s executed notebook if every cell passed; record what happened either way."""
    seconds = round(time.perf_counter() - run.started, 1) if run else None
    if run is not None:
        reasons = reasons + run.not_passed + run.problems
        missing = [n for n, i in enumerate(run.code_cells) if n not in run.passed
                   and run.nb.cells[i].source.strip()]
        if missing:
            reasons.append(f"cells {missing[:10]} did not pass (or did not run)")
    else:
        reasons = reasons or ["nbval's kernel did not start"]
    if reasons:
        _write_record(notebook, status="not cached", reasons=reasons[:20], seconds=seconds)
        return {"status": "not cached", "reasons": reasons}
    md = notebook.with_suffix(".md")
    executed = run.executed_notebook()
    if not md.is_file():
        _write_record(notebook, status="not cached", reasons=[f"{_rel(md)} is missing"], seconds=seconds)
        return {"status": "not cached"}
    page = read_page(md)
    page_hash, run_hash = notebook_hash(page), notebook_hash(executed)
    if page_hash != run_hash:
        why = (f"{_rel(notebook)}'s code cells or kernelspec differ from {_rel(md)} (run `jupytext "
               f"--update --to ipynb {_rel(md)}`): the build executes the .md itself")
        _write_record(notebook, status="not cached", reasons=[why], seconds=seconds)
        return {"status": "not cached", "reasons": [why]}
    # The page as the build reads it, with nbval's outputs: same hash, the .md's cell metadata.
    ran = [executed.cells[i] for i in run.code_cells]
    for cell, done in zip([c for c in page.cells if c.cell_type == "code"], ran):
        cell.outputs = copy.deepcopy(done.get("outputs", []))
        cell.execution_count = done.get("execution_count")
    for key in ("language_info", "widgets"):
        if key in executed.metadata:
            page.metadata[key] = copy.deepcopy(executed.metadata[key])

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    with cache_lock():
        cache = get_cache(str(jupyter_cache_dir()))
        record = cache.cache_notebook_bundle(
            CacheBundleIn(page, str(md), data={"execution_seconds": seconds, "executed_by": "nbval"}),
            check_validity=False, overwrite=True)
        pk = record.pk
    _write_record(notebook, status="cached", pk=pk, hashkey=page_hash, seconds=seconds)
    return {"status": "cached", "pk": pk}


def read_records() -> dict[str, dict]:
    """``{"chapters/NN_name.ipynb": record}`` for every notebook nbval finished in this session."""
    folder = runs_dir()
    out = {}
    if folder and folder.is_dir():
        for p in sorted(folder.glob("*.json")):
            data = json.loads(p.read_text(encoding="utf-8"))
            out[data["notebook"]] = data
    return out


def wait_for_records(notebooks: list[str], timeout_s: float) -> tuple[dict[str, dict], list[str]]:
    """Wait until nbval has finished each of ``notebooks`` (repository-relative paths); return the
    records and the notebooks still unfinished after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = read_records()
        missing = [n for n in notebooks if n not in records]
        if not missing or time.monotonic() > deadline:
            return records, missing
        time.sleep(1.0)


# --------------------------------------------------------------------------------------------
# What the build did


_EXEC_LINE = re.compile(r"^(?P<src>\S+?\.(?:md|ipynb)): (?:(?P<exec>Executing notebook using)"
                        r"|Using cached notebook: ID=(?P<pk>\d+))", re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def page_of(source: str) -> str:
    """The book page (``chapters/02_gemm``) of a source path the build names."""
    return _rel(Path(source).with_suffix(""))


def parse_build_log(log: str) -> tuple[list[str], dict[str, int]]:
    """(pages the build executed, {page: cache record id} of pages it took from the cache), from
    myst-nb's lines in a build log ("Executing notebook using ..." / "Using cached notebook: ID=n")."""
    executed, cached = [], {}
    for m in _EXEC_LINE.finditer(_ANSI.sub("", log)):
        if m.group("exec"):
            executed.append(page_of(m.group("src")))
        else:
            cached[page_of(m.group("src"))] = int(m.group("pk"))
    return sorted(executed), cached


def merged_from_cache(nb, cache_dir: Path | None):
    """``nb`` (a page's notebook in ``_build/jupyter_execute``) with the outputs of the cached
    notebook it matches: in cache mode myst-nb renders the cached outputs but writes the page's
    notebook there without them. ``nb`` itself where nothing matches."""
    if cache_dir is None or not (cache_dir / "global.db").is_file():
        return nb
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir))
    try:
        return cache.merge_match_into_notebook(nb)[1]
    except KeyError:
        return nb


# --------------------------------------------------------------------------------------------
# The plugin


def _is_nbval_item(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and item.path.suffix == ".ipynb"


class NotebookCachePlugin:
    """Registered by tests/conftest.py (``config.pluginmanager.register``), so its hooks see the
    notebook items too (a conftest's item hooks only see the items under its folder)."""

    def __init__(self, config):
        self.config = config
        self.is_worker = hasattr(config, "workerinput")
        self.owns_dir = False
        if not self.is_worker or not os.environ.get(ENV):
            base = Path(os.environ.get("PERFKIT_TEST_CACHE") or tempfile.gettempdir())
            base.mkdir(parents=True, exist_ok=True)
            os.environ[ENV] = tempfile.mkdtemp(prefix="nbval-", dir=base)
            self.owns_dir = True
        self.session_notebooks: list[str] = []
        self.runs: dict[Path, NotebookRun] = {}
        self.reasons: dict[Path, list[str]] = {}
        self.scheduler = None
        self._undo: list[tuple[type, str, Any]] = []
        opt = config.option
        if getattr(opt, "nbval", False) or getattr(opt, "nbval_lax", False):
            self._patch_nbval()

    # -- nbval's kernel, tapped
    def _patch(self, cls, name, make):
        original = getattr(cls, name)
        self._undo.append((cls, name, original))
        setattr(cls, name, make(original))

    def _patch_nbval(self) -> None:
        from nbval.kernel import RunningKernel
        from nbval.plugin import IPyNbCell, IPyNbFile

        plugin = self

        def get_message(original):
            def wrapper(self, stream, timeout=None):
                msg = original(self, stream, timeout=timeout)
                if msg.get("msg_type") == "kernel_info_reply":
                    info = msg.get("content", {}).get("language_info")
                    if info:
                        self._perfkit_language_info = info
                run = getattr(self, "_perfkit_run", None)
                if run is not None and stream == "iopub":
                    run.on_message(msg)
                return msg
            return wrapper

        def execute_cell_input(original):
            def wrapper(self, cell_input, allow_stdin=None):
                msg_id = original(self, cell_input, allow_stdin=allow_stdin)
                run = getattr(self, "_perfkit_run", None)
                if run is not None:
                    run.on_execute(msg_id)
                return msg_id
            return wrapper

        def setup(original):
            def wrapper(self):
                original(self)
                try:
                    run = NotebookRun(Path(self.path), copy.deepcopy(self.nb),
                                      language_info=getattr(self.kernel, "_perfkit_language_info", None))
                except Exception as e:  # never fail nbval's test for the cache's sake
                    plugin.reasons.setdefault(Path(self.path), []).append(f"capture failed: {e!r}")
                    return
                plugin.runs[Path(self.path)] = run
                self.kernel._perfkit_run = run
            return wrapper

        def runtest(original):
            def wrapper(self):
                run = plugin.runs.get(Path(self.path))
                if run is not None:
                    run.begin(self.cell_num)
                try:
                    return original(self)
                finally:
                    if run is not None:
                        try:
                            run.end()
                        except Exception as e:
                            run.problems.append(f"cell {self.cell_num}: capture failed: {e!r}")
            return wrapper

        self._patch(RunningKernel, "get_message", get_message)
        self._patch(RunningKernel, "execute_cell_input", execute_cell_input)
        self._patch(IPyNbFile, "setup", setup)
        self._patch(IPyNbCell, "runtest", runtest)

    def pytest_unconfigure(self, config):
        for cls, name, original in reversed(self._undo):
            setattr(cls, name, original)
        self._undo.clear()
        if not self.is_worker and self.scheduler is not None and self.scheduler.seconds:
            cache = getattr(config, "cache", None)
            if cache is not None:
                known = cache.get(DURATIONS_KEY, {}) or {}
                cache.set(DURATIONS_KEY, known | {k: round(v, 1) for k, v in self.scheduler.seconds.items()})
        if self.owns_dir and session_dir() is not None and not os.environ.get(KEEP_ENV):
            shutil.rmtree(session_dir(), ignore_errors=True)

    # -- each cell's outcome, and the notebook's end
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if not _is_nbval_item(item):
            return
        report = outcome.get_result()
        run = self.runs.get(Path(item.path))
        if run is None:
            return
        if report.when == "call" and report.passed:
            run.passed.add(item.cell_num)
        elif not report.passed:
            run.not_passed.append(f"cell {item.cell_num}: {report.when} {report.outcome}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        outcome = yield
        if not _is_nbval_item(item) or (nextitem is not None and nextitem.parent is item.parent):
            return
        path = Path(item.path)
        reasons = list(self.reasons.pop(path, []))
        if outcome.excinfo is not None:
            reasons.append(f"the notebook's teardown failed: {outcome.excinfo[1]!r}")
        run = self.runs.pop(path, None)
        try:
            store(run, path, reasons)
        except Exception as e:  # a cache problem must not fail the notebook's test
            _write_record(path, status="not cached", reasons=[f"storing failed: {e!r}"])

    # -- order and tiers
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        self.session_notebooks = sorted({_rel(item.path) for item in items if _is_nbval_item(item)})

        def rank(item):
            if _is_nbval_item(item):
                return 0
            return 2 if _rel(item.path) == BOOK_TESTS else 1

        items[:] = sorted(items, key=rank)  # stable: each file's items stay together, in order

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") != "loadfile":
            return None
        cache = getattr(config, "cache", None)
        durations = (cache.get(DURATIONS_KEY, {}) if cache is not None else {}) or {}
        self.scheduler = make_scheduler(config, log, durations)
        return self.scheduler


def register(config) -> NotebookCachePlugin:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        plugin = NotebookCachePlugin(config)
        config.pluginmanager.register(plugin, PLUGIN_NAME)
    return plugin


def get_plugin(config) -> NotebookCachePlugin | None:
    return config.pluginmanager.get_plugin(PLUGIN_NAME)
