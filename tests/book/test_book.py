"""The book: chapter pairing, the build, links, and the rendered pages in a real browser.

The book is built once per test session (``built_book`` fixture), into a temporary folder, with
the same command as the README: ``jupyter-book build . --all -W -n --keep-going``. Keep these
tests in one file: with ``pytest -n 2 --dist loadfile`` they then share that one build.

A chapter is executed once per test run: where nbval runs the chapter notebooks in the same session,
they run first (tests/notebook_cache.py), and the build takes every chapter nbval ran successfully
from their saved execution (a copy of _config.yml with ``execute_notebooks: cache``); it executes
only the other pages (the landing page; a chapter nbval did not run or that failed).

Browser tests use Debian's chromium (``apt-get install -y chromium``) through Playwright, never a
browser downloaded by Playwright. Every request that is not to the local server is aborted,
except the widget JS, which is answered from npm tarballs (``npm pack``) when they are available.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

import notebook_cache
from output_checks import problems as figure_problems
from site_helpers import (
    CHROMIUM, CHROMIUM_ARGS, IN_CI, REPO, NpmCdn, SiteServer, build_book, chapter_sources,
    content_type, ensure_widget_vendor, load_yaml, toc_chapters, toc_files,
)

pytestmark = pytest.mark.book

BUILD_TIMEOUT_S = float(os.environ.get("PERFKIT_BOOK_BUILD_TIMEOUT", 3600))
PAGE_TIMEOUT_MS = 60_000
# Harmless page errors: sphinx-thebe 0.3.1 declares THEBE_JS_URL twice on every page.
IGNORED_PAGE_ERRORS = (re.compile(r"THEBE_JS_URL"),)

TOC_FILES = toc_files()
TOC_CHAPTERS = toc_chapters()
CHAPTER_MDS = [p.relative_to(REPO).as_posix() for p in chapter_sources()]
LAB_MDS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "labs").glob("*.md"))
# Every MyST notebook: the chapters, the landing page, the rules page, the teaching page and the labs
# (paired with an .ipynb for Colab too).
NOTEBOOK_MDS = ["intro.md", "rules.md", *CHAPTER_MDS, "teach.md", *LAB_MDS]
#: The workshop kit's pages: the teaching page and its labs (a part of their own, for teachers; the
#: labs are the teaching page's sections, tests/book/workshop/ checks).
TOC_LABS = [entry for entry in TOC_FILES if entry.startswith("labs/")]
WORKSHOP_FILES = ["teach", *TOC_LABS]


def _skip_or_fail(reason: str):
    """Skip locally; fail in CI (CI=true), where every check is meant to run."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true, so this is a failure, not a skip)")
    pytest.skip(reason)


# --------------------------------------------------------------------------------------------
# Sources: the table of contents and the .md/.ipynb pairs


def test_toc_files_exist():
    for entry in TOC_FILES:
        md, ipynb = REPO / f"{entry}.md", REPO / f"{entry}.ipynb"
        if entry.startswith(("chapters/", "labs/")):
            assert md.is_file(), f"_toc.yml lists {entry} but {md.relative_to(REPO)} is missing"
            assert ipynb.is_file(), (f"_toc.yml lists {entry} but its paired {ipynb.relative_to(REPO)} is "
                                     f"missing: run `jupytext --to ipynb {entry}.md` once and commit it")
        else:
            assert md.is_file() or ipynb.is_file(), f"_toc.yml lists {entry}, which does not exist"


def test_every_chapter_is_in_the_toc():
    unlisted = [md for md in CHAPTER_MDS + LAB_MDS if md[:-3] not in TOC_FILES]
    assert not unlisted, f"chapters or labs not in _toc.yml (they would not be built): {unlisted}"
    orphans = [p.relative_to(REPO).as_posix() for folder in ("chapters", "labs")
               for p in (REPO / folder).glob("*.ipynb") if not p.with_suffix(".md").is_file()]
    assert not orphans, f"notebooks without a paired .md (nbval would still run them): {orphans}"


@pytest.mark.parametrize("md", NOTEBOOK_MDS)
def test_chapter_has_kernelspec(md):
    text = (REPO / md).read_text(encoding="utf-8")
    m = re.match(r"^---\n(.*?)\n---\n", text, flags=re.S)
    assert m, f"{md} has no YAML header; a chapter is a MyST notebook with a kernelspec header"
    header = yaml.safe_load(m.group(1))
    assert header.get("kernelspec", {}).get("name"), (
        f"{md} has no kernelspec in its header, so Jupyter Book would treat it as plain Markdown "
        "(not executed, no Colab button)")
    assert header.get("jupytext", {}).get("text_representation", {}).get("format_name") == "myst", md


def _colab_cell_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("colab_cell", REPO / "scripts" / "colab_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("md", NOTEBOOK_MDS)
def test_first_cell_installs_perfkit_on_colab_only(md):
    """The first code cell is hidden (remove-cell), pip-installs perfkit only inside Colab, from the
    one place that says where (_config.yml's repository), and never touches torch."""
    import jupytext

    script = _colab_cell_script()
    text = (REPO / md).read_text(encoding="utf-8")
    assert script.updated(text, script.fetches(REPO / md)) == text, (f"{md}: the Colab install cell is not the one _config.yml gives: "
                                         "run `python scripts/colab_cell.py`")
    nb = jupytext.read(REPO / md)
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = code[0]
    cfg = load_yaml("_config.yml")["repository"]
    want = f'"perfkit[fetch] @ git+{cfg["url"]}@{cfg["branch"]}"'
    assert "remove-cell" in first.metadata.get("tags", []), f"{md}: first code cell is not tagged remove-cell"
    assert 'if "google.colab" in sys.modules:' in first.source, f"{md}: first code cell is not guarded for Colab"
    assert f"%pip install -q {want}" in first.source, f"{md}: first code cell does not `%pip install -q {want}`"
    if script.fetches(REPO / md):
        assert "    !python -m perfkit published fetch {tables}" in first.source and "deepbench_gemm" in first.source, (
            f"{md}: the Colab cell does not fetch the published tables the book reads")
    else:  # the teaching page and the labs read only perfkit's own recordings: a room waits for nothing
        assert "published fetch" not in first.source, f"{md}: the Colab cell fetches tables the page never reads"
    code_lines = [line for line in first.source.splitlines() if not line.lstrip().startswith("#")]
    assert not any("torch" in line for line in code_lines), (
        f"{md}: the Colab install cell must not touch torch (Colab's own CUDA torch must stay)")
    later = [i for i, c in enumerate(code[1:], 2) if "pip install" in c.source or cfg["url"] in c.source]
    assert not later, f"{md}: code cells {later} install perfkit again or repeat its URL"


def _prose_lines(text: str):
    """(line number, line) of a MyST page outside its front matter, code cells and fenced blocks."""
    fence = None
    lines = text.splitlines()
    start = lines.index("---", 1) + 1 if lines and lines[0] == "---" else 0
    for n, line in enumerate(lines[start:], start + 1):
        m = re.match(r"^(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.startswith(fence):
            fence = None
        elif fence is None:
            yield n, line


#: Works a page may name without a link: each name (a regex) must then be listed on the Sources page.
NAMED_WORKS = {
    r"FlashAttention": "FlashAttention", r"Megatron": "Megatron-LM", r"\bGQA\b|grouped-query": "GQA",
    r"Kaplan": "Kaplan", r"nccl-tests": "nccl-tests", r"DeepBench": "DeepBench", r"Liger": "Liger-Kernel",
    r"gpu-benches": "gpu-benches", r"DeepGEMM": "DeepGEMM", r"OpenXLA": "OpenXLA", r"mlsysim|MLSys·im": "mlsysim",
    r"Chinchilla|Hoffmann": "Hoffmann", r"LLaMA": "LLaMA", r"PaLM": "PaLM", r"ResNet": "ResNet",
    r"GPT-2": "GPT-2",
}


def _normal_url(url: str) -> str:
    return url.split("#")[0].rstrip("/").removeprefix("https://").removeprefix("http://")


def test_sources_list_every_cited_work():
    """Every external link of a page's prose is on the Sources page, and so is every work it names."""
    refs = (REPO / "references.md").read_text(encoding="utf-8")
    listed = {_normal_url(u) for u in re.findall(r"\]\((https?://[^)\s]+)\)", refs)}
    own = load_yaml("_config.yml")["repository"]["url"]
    missing, unnamed = {}, {}
    for md in NOTEBOOK_MDS:
        prose = "\n".join(line for _, line in _prose_lines((REPO / md).read_text(encoding="utf-8")))
        for url in re.findall(r"\]\((https?://[^)\s]+)\)", prose):
            if not url.startswith(own) and _normal_url(url) not in listed:
                missing.setdefault(url, md)
        for pattern, name in NAMED_WORKS.items():
            if re.search(pattern, prose) and name not in refs:
                unnamed.setdefault(name, md)
    assert not missing, f"links not on the Sources page (references.md): {missing}"
    assert not unnamed, f"works named in a page but not on the Sources page: {unnamed}"


@pytest.mark.parametrize("md", NOTEBOOK_MDS)
def test_committed_ipynb_has_no_outputs(md):
    ipynb = (REPO / md).with_suffix(".ipynb")
    if not ipynb.is_file():
        pytest.fail(f"{ipynb.relative_to(REPO)} is missing: run `jupytext --to ipynb {md}` once")
    nb = json.loads(ipynb.read_text(encoding="utf-8"))
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, (f"{ipynb.relative_to(REPO)} has outputs or execution counts in cells {dirty}; "
                       f"regenerate it from the .md with `jupytext --update --to ipynb {md}` "
                       "(or clear outputs) before committing")
    assert "widgets" not in nb.get("metadata", {}), f"{ipynb.name} carries saved widget state"


@pytest.mark.parametrize("md", NOTEBOOK_MDS)
def test_ipynb_is_in_sync_with_md(md, tmp_path):
    """`jupytext --update --to ipynb` on a copy must reproduce the committed .ipynb exactly."""
    src = REPO / md
    ipynb = src.with_suffix(".ipynb")
    if not ipynb.is_file():
        pytest.fail(f"{ipynb.relative_to(REPO)} is missing: run `jupytext --to ipynb {md}` once")
    for p in (src, ipynb, REPO / "jupytext.toml"):
        shutil.copy2(p, tmp_path / p.name)
    proc = subprocess.run([sys.executable, "-m", "jupytext", "--update", "--to", "ipynb", src.name],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    committed = json.loads(ipynb.read_text(encoding="utf-8"))
    regenerated = json.loads((tmp_path / ipynb.name).read_text(encoding="utf-8"))
    if committed != regenerated:
        changed = [i for i, (a, b) in enumerate(zip(committed["cells"], regenerated["cells"])) if a != b]
        pytest.fail(f"{ipynb.relative_to(REPO)} is out of date with {md} (cells differ: {changed[:10]}, "
                    f"cell counts {len(committed['cells'])} vs {len(regenerated['cells'])}, metadata "
                    f"{'differs' if committed.get('metadata') != regenerated.get('metadata') else 'same'}). "
                    f"Run `jupytext --update --to ipynb {md}` and commit the .ipynb.")


# --------------------------------------------------------------------------------------------
# The build (once per session)


def _nbval_cell_timeout(config) -> float:
    return float(getattr(config.option, "nbval_cell_timeout", None) or 900)


@pytest.fixture(scope="session")
def nbval_run(request):
    """The chapter notebooks nbval runs in this session, and their records once all are finished
    ({"chapters/NN.ipynb": {"status": "cached" | "not cached", ...}}); ([], {}) without nbval."""
    plugin = notebook_cache.get_plugin(request.config)
    notebooks = plugin.session_notebooks if plugin else []
    if not notebooks:
        return [], {}
    # Scheduled after every notebook; with pytest-xdist a worker's last notebook cell may still
    # be running (it only runs once that worker is told to stop).
    records, missing = notebook_cache.wait_for_records(notebooks, _nbval_cell_timeout(request.config) + 300)
    if missing:
        print(f"nbval did not finish {missing}: the build executes them itself")
    return notebooks, records


@pytest.fixture(scope="session")
def built_book(nbval_run):
    # PERFKIT_BOOK_PREBUILT=<--path-output folder of an earlier build>: test that build (developers
    # re-running the page tests); CI always builds.
    prebuilt = os.environ.get("PERFKIT_BOOK_PREBUILT")
    if prebuilt and not IN_CI:
        from site_helpers import BuildResult

        yield BuildResult(0, "(prebuilt)", Path(prebuilt), 0.0)
        return
    notebooks, _records = nbval_run
    result = build_book(BUILD_TIMEOUT_S, cache_dir=notebook_cache.jupyter_cache_dir() if notebooks else None)
    yield result
    shutil.rmtree(result.out_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def site(built_book):
    if not built_book.ok:
        pytest.skip("the book did not build; see test_book_builds")
    return built_book.html


def test_book_builds(built_book, nbval_run):
    _, records = nbval_run
    from_nbval = sorted(page for page, pk in built_book.cached.items()
                        if any(r.get("pk") == pk for r in records.values()))
    print(f"book built in {built_book.seconds:.1f} s into {built_book.out_dir}: executed "
          f"{len(built_book.executed)} notebook(s) {built_book.executed}, took {len(from_nbval)} from "
          f"nbval's run in this session {from_nbval}")
    for name, record in sorted(records.items()):
        if record["status"] != "cached":
            print(f"  {name}: not taken from nbval's run: {'; '.join(record.get('reasons', []))}")
    assert built_book.ok, (f"`jupyter-book build . --all -W -n --keep-going` failed "
                           f"(exit {built_book.returncode}); last lines:\n{built_book.log_tail()}")


def test_build_does_not_execute_what_nbval_ran(built_book, nbval_run):
    """A chapter nbval ran successfully in this session is taken from that run, not executed again."""
    _, records = nbval_run
    ran = {r["page"]: r for r in records.values() if r["status"] == "cached"}
    if not ran:
        pytest.skip("nbval ran no chapter successfully in this session (run the chapters/*.ipynb with "
                    "the book tests: `python -m pytest -n 2 --dist loadfile`)")
    if not built_book.ok:
        pytest.skip("the book did not build; see test_book_builds")
    again = sorted(set(ran) & set(built_book.executed))
    assert not again, f"the build executed again chapters nbval had run: {again}"
    wrong = {page: (built_book.cached.get(page), r["pk"]) for page, r in ran.items()
             if built_book.cached.get(page) != r["pk"]}
    assert not wrong, f"pages not taken from nbval's run ({{page: (record used, nbval's record)}}): {wrong}"


def test_every_toc_page_was_built(site):
    for entry in TOC_FILES:
        assert (site / f"{entry}.html").is_file(), f"{entry}.html is missing from the built site"


def test_every_figure_call_shows_an_image_or_a_note(built_book):
    """Built with MPLBACKEND=Agg (as on a headless server): every figure call of every executed
    page left an image, a styled note (one that names what is shown instead when a recording is
    missing), an interactive figure or a widget; never nothing, never a printed "No figure"."""
    if not built_book.ok:
        pytest.skip("the book did not build; see test_book_builds")
    found = []
    for md in NOTEBOOK_MDS:
        entry = md[:-3]
        nb = built_book.executed_notebook(entry)
        assert nb is not None, f"{entry}: no executed notebook in _build/jupyter_execute/ (was it executed?)"
        found += figure_problems(nb, name=f"{entry}.ipynb")
    assert not found, "figure calls that showed nothing:\n" + "\n".join(found)


def test_links_offline(site):
    """Internal links, images and #anchors of the built site (external URLs are not fetched)."""
    exe = shutil.which("linkchecker", path=str(Path(sys.executable).parent)) or shutil.which("linkchecker")
    if exe is None:
        pytest.fail("linkchecker is not installed (pip install -r requirements.txt)")
    proc = subprocess.run([exe, "--config", str(REPO / "linkcheckerrc"), "--no-status",
                           str(site / "index.html")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"linkchecker found broken links or anchors:\n{proc.stdout[-8000:]}"
    assert " 0 errors found" in proc.stdout and " 0 warnings found" in proc.stdout, proc.stdout[-3000:]


# --------------------------------------------------------------------------------------------
# The rendered pages in Debian's chromium


@pytest.fixture(scope="session")
def server(site):
    with SiteServer(site) as s:
        yield s


@pytest.fixture(scope="session")
def npm_cdn():
    folder, why = ensure_widget_vendor()
    return (NpmCdn(folder), "") if folder else (None, why)


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        _skip_or_fail(f"{CHROMIUM} not found: install Debian's chromium: apt-get install -y chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed (pip install -r requirements.txt)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


class LoadedPage:
    def __init__(self, page, page_errors, blocked):
        self.page, self.page_errors, self.blocked = page, page_errors, blocked


@pytest.fixture(scope="session")
def open_page(browser, server, npm_cdn):
    """open_page("chapters/01_background") -> LoadedPage, hermetic: only 127.0.0.1 is reached
    (and the CDN's JS, answered from local npm tarballs)."""
    cdn, _ = npm_cdn
    contexts = []

    def _open(entry: str) -> LoadedPage:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        contexts.append(ctx)
        page = ctx.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        page_errors, blocked = [], []
        page.on("pageerror", lambda exc: page_errors.append(str(exc)))

        def route(r):
            url = r.request.url
            host = urlparse(url).hostname
            if host == "127.0.0.1":
                return r.continue_()
            body = cdn.lookup(url) if cdn else None
            if body is not None:
                return r.fulfill(status=200, body=body, headers={
                    "Content-Type": content_type(url), "Access-Control-Allow-Origin": "*"})
            blocked.append(url)
            return r.abort()

        page.route("**/*", route)
        page.goto(server.url + f"{entry}.html", wait_until="load", timeout=PAGE_TIMEOUT_MS)
        return LoadedPage(page, page_errors, blocked)

    yield _open
    for ctx in contexts:
        ctx.close()


ERROR_OUTPUT_SELECTORS = ".output.error, .output.traceback"
# What a page must never show: the build machine's paths, or a raw Python warning line.
MACHINE_PATH = re.compile(r"(/work/|/home/|/tmp/|/root/|/usr/|site-packages|\.py:\d+)")
RAW_WARNING = re.compile(r"\b[A-Z]\w*Warning: ")

SNAPSHOT_JS = """box => { const gd = box.querySelector('.plotly-graph-div');
    return JSON.stringify([gd.data.map(t => [t.x, t.y, t.text, t.visible]), gd.layout.title,
                           gd.layout.shapes, gd.layout.annotations]); }"""


#: How long a page may take to redraw after a click or a resize before the test says it did not (a
#: slow CI machine redraws late; the checks poll, so a fast one does not wait this long).
REDRAW_TIMEOUT_MS = 15_000


def _changed(page, box, before: str) -> bool:
    """Whether the figure in ``box`` differs from its snapshot ``before`` within :data:`REDRAW_TIMEOUT_MS`."""
    for _ in range(REDRAW_TIMEOUT_MS // 100):
        if box.evaluate(SNAPSHOT_JS) != before:
            return True
        page.wait_for_timeout(100)
    return box.evaluate(SNAPSHOT_JS) != before


def _move_controls(page) -> list[dict]:
    """Move every Plotly slider and menu with the mouse to another state; report, per figure,
    whether its data or title changed (the states were computed by perfkit at build time)."""
    results = []
    boxes = page.locator(".perfkit-interactive")
    for i in range(boxes.count()):
        box = boxes.nth(i)
        gd = box.locator(".plotly-graph-div").first
        info = {"name": gd.get_attribute("id"), "alt": box.get_attribute("aria-label") or "", "moved": []}
        layout = gd.evaluate("gd => ({s: gd.layout.sliders || [], m: gd.layout.updatemenus || []})")
        if layout["s"]:
            before = box.evaluate(SNAPSHOT_JS)
            rail = box.locator(".slider-rail-rect").first
            rail.scroll_into_view_if_needed()
            r = rail.bounding_box()
            active, n = layout["s"][0].get("active", 0), len(layout["s"][0]["steps"])
            x = r["x"] + r["width"] * (0.97 if active < n / 2 else 0.03)
            page.mouse.click(x, r["y"] + r["height"] / 2)
            info["moved"].append(["slider", _changed(page, box, before)])
        if layout["m"]:
            before = box.evaluate(SNAPSHOT_JS)
            header = box.locator(".updatemenu-header").first
            header.scroll_into_view_if_needed()
            header.click(timeout=5_000)
            other = 1 if layout["m"][0].get("active", 0) == 0 else 0
            try:
                # a click event on the entry itself: the open menu's header group lies over its
                # buttons for Playwright's hit test
                box.locator(".updatemenu-dropdown-button").nth(other).dispatch_event("click", timeout=5_000)
            except Exception as e:  # playwright TimeoutError: the menu did not open
                info["moved"].append(["menu", f"could not pick another entry: {e}"])
            else:
                info["moved"].append(["menu", _changed(page, box, before)])
        results.append(info)
    return results


#: The widths a reader's window has (a laptop, a small laptop or a tablet in landscape).
WIDTHS = (1280, 1024)
OVERFLOW_JS = """() => {
    const article = document.querySelector('article');
    const right = article.getBoundingClientRect().right;
    const sel = ['.cell_input pre', '.cell_output pre', '.cell_output .output', '.cell_output table',
                 '.cell_output img', '.perfkit-interactive', '.perfkit-table-wrap', 'table']
        .map(s => 'article ' + s).join(', ');
    return Array.from(document.querySelectorAll(sel))
        .filter(e => e.offsetParent !== null)
        .filter(e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > right + 1)
        .map(e => `${e.tagName.toLowerCase()}.${(e.className || '').toString().split(' ')[0]} ` +
                  `(${e.scrollWidth} px in ${e.clientWidth}): ` + (e.innerText || e.getAttribute('src') || '')
                  .trim().split('\\n')[0].slice(0, 70));
}"""


#: Table cells whose longest word is wider than the cell's text box: the word wraps letter by letter.
SQUEEZED_JS = """() => {
    const ctx = document.createElement('canvas').getContext('2d');
    const out = [];
    for (const cell of document.querySelectorAll('article table td, article table th')) {
        if (cell.offsetParent === null) continue;
        const cs = getComputedStyle(cell);
        ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
        // a word may break after its hyphens ("half-" "bandwidth"), never elsewhere
        const words = (cell.innerText || '').split(/\\s+|(?<=-)/).filter(w => w);
        if (!words.length) continue;
        const widest = Math.max(...words.map(w => ctx.measureText(w).width));
        const word = words.find(w => ctx.measureText(w).width === widest);
        const inner = cell.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
        if (widest > inner + 2) out.push(`"${word}" (${Math.round(widest)} px in a ${Math.round(inner)} px column)`);
    }
    return out;
}"""


def _squeezed(page) -> dict[int, list[str]]:
    """Per window width, the table cells too narrow for their longest word."""
    found = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(300)
        found[width] = page.evaluate(SQUEEZED_JS)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    return found


def _overflow(page) -> dict[int, list[str]]:
    """Per window width, the code cells and outputs wider than their box or the text column."""
    found = {}
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        # responsive Plotly figures follow the window after its (debounced) resize event
        page.evaluate("() => window.dispatchEvent(new Event('resize'))")
        page.wait_for_timeout(800)
        found[width] = page.evaluate(OVERFLOW_JS)
        for _ in range(REDRAW_TIMEOUT_MS // 500):  # a slow machine may not have followed the resize yet
            if not found[width]:
                break
            page.wait_for_timeout(500)
            found[width] = page.evaluate(OVERFLOW_JS)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    return found


#: The page's height at 1280 × 900 and, on the landing page, how far down its chapter list starts.
LENGTH_JS = """() => {
    const list = Array.from(document.querySelectorAll('article h2'))
        .find(e => /^\\s*chapters\\b/i.test(e.textContent));
    return {height_px: document.documentElement.scrollHeight,
            list_top_px: list ? list.getBoundingClientRect().top + window.scrollY : null};
}"""
#: Text of an interactive figure cut by its edges, and titles that run into each other.
PLOTLY_TEXT_JS = """() => {
    const out = [];
    for (const box of document.querySelectorAll('.perfkit-interactive .svg-container')) {
        const edge = box.getBoundingClientRect();
        const texts = Array.from(box.querySelectorAll('.annotation-text, .gtitle, .xtitle, .ytitle, .legendtext'))
            .filter(t => t.getBoundingClientRect().width > 0);
        for (const t of texts) {
            const r = t.getBoundingClientRect();
            if (r.left < edge.left - 1 || r.right > edge.right + 1 || r.top < edge.top - 1 || r.bottom > edge.bottom + 1)
                out.push(`cut by the figure's edge: "${t.textContent.slice(0, 60)}"`);
        }
        const titles = texts.filter(t => t.matches('.gtitle, .xtitle, .ytitle'));
        for (let i = 0; i < titles.length; i++) for (let j = i + 1; j < titles.length; j++) {
            const a = titles[i].getBoundingClientRect(), b = titles[j].getBoundingClientRect();
            if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
                out.push(`"${titles[i].textContent.slice(0, 40)}" overlaps "${titles[j].textContent.slice(0, 40)}"`);
        }
    }
    return out;
}"""


def _collect(lp: LoadedPage, entry: str) -> dict:
    """Everything the page tests check, read from one page load."""
    page = lp.page
    facts = {"entry": entry, "blocked": lp.blocked}
    facts["overflow"] = _overflow(page)
    facts["squeezed"] = _squeezed(page)
    facts.update(page.evaluate(LENGTH_JS))
    h1 = page.locator("article h1")
    facts["h1"] = h1.first.inner_text().strip() if h1.count() else ""
    facts.update(page.evaluate("""() => {
        const imgs = Array.from(document.querySelectorAll('article img'));
        const outs = Array.from(document.querySelectorAll('article .cell_output'));
        return {
          broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
          figures: Array.from(document.querySelectorAll('article .cell_output img'))
              .filter(i => i.naturalWidth > 0).map(i => [i.getAttribute('src'), i.getAttribute('alt') || '']),
          outputs: outs.map(e => e.innerText),
          stderr: Array.from(document.querySelectorAll('.output.stderr')).map(e => e.innerText),
          colab: Array.from(document.querySelectorAll('a[href*="colab.research.google.com"]')).map(a => a.href),
          dropdowns: Array.from(document.querySelectorAll('article details.sd-dropdown'))
              .map(d => [d.open, d.querySelector('summary').innerText.trim()]),
          interactive: document.querySelectorAll('.perfkit-interactive').length,
          devices: Array.from(document.querySelectorAll('article .perfkit-device'))
              .map(d => [d.querySelector('p').innerText, d.querySelector('details').open]),
          notes: Array.from(document.querySelectorAll('article .cell_output .perfkit-note'))
              .map(n => [getComputedStyle(n).borderLeftStyle !== 'none' || getComputedStyle(n).backgroundColor,
                         n.innerText]),
          widget_views: document.querySelectorAll(
              'script[type="application/vnd.jupyter.widget-view+json"]').length,
          uncaptioned: Array.from(document.querySelectorAll('article .cell_output table'))
              .filter(t => !t.closest('.perfkit-device') && !t.querySelector('caption')
                           && !t.matches('.perfkit-verdicts, .perfkit-chapters')
                           && !Array.from(t.querySelectorAll('th')).some(th => /rests on/i.test(th.innerText)))
              .map(t => (t.querySelector('tr') || t).innerText.replace(/\\s+/g, ' ').slice(0, 80)),
        };
    }"""))
    facts["errors"] = [e.inner_text()[:2000] for e in page.locator(ERROR_OUTPUT_SELECTORS).all()]
    if facts["interactive"]:
        try:
            page.wait_for_function(
                """n => document.querySelectorAll('.perfkit-interactive .plotly-graph-div .main-svg').length >= n""",
                arg=facts["interactive"], timeout=PAGE_TIMEOUT_MS)
        except Exception as e:  # playwright TimeoutError: Plotly did not draw
            facts["moves"] = f"the interactive figures did not render: {e}"
        else:
            facts["plotly_text"] = page.evaluate(PLOTLY_TEXT_JS)
            facts["moves"] = _move_controls(page)
    if facts["dropdowns"]:
        first = page.locator("article details.sd-dropdown summary").first
        first.click()
        facts["dropdown_opens"] = page.evaluate(
            "() => document.querySelector('article details.sd-dropdown').open")
    if facts["widget_views"]:
        try:
            page.wait_for_function(
                """n => Array.from(document.querySelectorAll('.jupyter-widgets'))
                    .filter(e => !e.parentElement.closest('.jupyter-widgets')).length >= n""",
                arg=facts["widget_views"], timeout=PAGE_TIMEOUT_MS)
            facts["widgets_rendered"] = True
        except Exception as e:  # playwright TimeoutError
            facts["widgets_rendered"] = str(e)
    facts["page_errors"] = [e for e in lp.page_errors if not any(p.search(e) for p in IGNORED_PAGE_ERRORS)]
    return facts


@pytest.fixture(scope="session")
def page_facts(open_page, npm_cdn):
    """page_facts(entry) -> the facts of that page, from one page load per entry (cached)."""
    cache: dict[str, dict] = {}

    def _facts(entry: str) -> dict:
        if entry not in cache:
            lp = open_page(entry)
            try:
                cache[entry] = _collect(lp, entry)
            finally:
                lp.page.context.close()
        return cache[entry]

    return _facts


@pytest.mark.parametrize("entry", TOC_FILES)
def test_page_renders(page_facts, entry):
    f = page_facts(entry)
    assert f["h1"], f"{entry}: no <h1> in the article"
    assert not f["broken"], f"{entry}: images that did not load: {f['broken']}"
    assert not f["errors"], f"{entry}: error output in the page:\n{f['errors'][0]}"
    tracebacks = [t for t in f["outputs"] if re.search(r"Traceback \(most recent call last\)", t)]
    assert not tracebacks, f"{entry}: a cell output contains a traceback:\n{tracebacks[0][:2000]}"
    stderr_errors = [t for t in f["stderr"] if re.search(r"Traceback|\w*Error\b", t)]
    assert not stderr_errors, f"{entry}: stderr output reports an error:\n{stderr_errors[0][:2000]}"
    assert not f["page_errors"], f"{entry}: JavaScript errors: {f['page_errors']}"


@pytest.mark.parametrize("entry", TOC_FILES)
def test_no_machine_path_or_raw_warning(page_facts, entry):
    f = page_facts(entry)
    for text in f["outputs"]:
        m = MACHINE_PATH.search(text) or RAW_WARNING.search(text)
        assert not m, (f"{entry}: a cell output shows {m.group(0)!r} (a machine path or a raw warning); "
                       f"say it in a caption or a note instead:\n{text[max(0, m.start() - 300):m.end() + 300]}")


@pytest.mark.parametrize("entry", TOC_FILES)
def test_nothing_overflows(page_facts, entry):
    """At 1280 and 1024 px, no code cell or output needs sideways scrolling or leaves the column."""
    for width, wide in page_facts(entry)["overflow"].items():
        assert not wide, f"{entry} at {width} px: {len(wide)} code cells or outputs overflow:\n" + "\n".join(wide[:10])


@pytest.mark.parametrize("entry", TOC_CHAPTERS)
def test_one_short_device_line(page_facts, entry):
    """A chapter says in one short line what it runs on; the full description is folded."""
    devices = page_facts(entry)["devices"]
    assert len(devices) == 1, f"{entry}: {len(devices)} device cards (pk.device_card) instead of one"
    line, is_open = devices[0]
    assert "\n" not in line.strip() and len(line) < 260 and not is_open, (entry, line, is_open)
    assert "0.0 TFLOP/s" not in " ".join(page_facts(entry)["outputs"])


@pytest.mark.parametrize("entry", TOC_FILES)
def test_missing_data_is_a_styled_note(page_facts, entry):
    """A figure without data is an admonition, not a printed line."""
    f = page_facts(entry)
    printed = [t for t in f["outputs"] if "No figure" in t]
    assert not printed, f"{entry}: printed 'No figure' lines: {printed[:2]}"
    for styled, text in f["notes"]:
        assert styled, f"{entry}: a perfkit note without the theme's admonition style: {text[:100]}"


@pytest.mark.parametrize("entry", TOC_CHAPTERS)
def test_chapter_figures(page_facts, entry):
    f = page_facts(entry)
    srcs = [src for src, _ in f["figures"]]
    assert srcs, f"{entry}: no figure among the cell outputs (every chapter draws at least one)"
    # A figure shown both by a backend and as the cell's result would appear twice.
    twice = sorted({s for s in srcs if srcs.count(s) > 1})
    assert not twice, f"{entry}: the same figure appears more than once: {twice}"
    no_alt = [src[:60] for src, alt in f["figures"]
              if len(alt) < 20 or alt.endswith(".png") or alt.startswith(("../", "data:"))]
    assert not no_alt, (f"{entry}: figures without alt text (give the cell `mystnb: image: alt: ...` "
                        f"metadata): {no_alt}")


@pytest.mark.parametrize("entry", TOC_CHAPTERS)
def test_interactive_figures_move_without_a_kernel(page_facts, entry):
    f = page_facts(entry)
    assert f["interactive"] >= 1, f"{entry}: no interactive figure (perfkit.interactive) in the page"
    moves = f.get("moves")
    assert isinstance(moves, list), f"{entry}: {moves}"
    for fig in moves:
        assert fig["name"] and len(fig["alt"]) >= 20, f"{entry}: an interactive figure without id or alt: {fig}"
        assert fig["moved"], f"{entry}: {fig['name']} has no slider or menu"
        for control, changed in fig["moved"]:
            assert changed is True, f"{entry}: moving the {control} of {fig['name']} did not change the figure ({changed})"


@pytest.mark.parametrize("entry", [*TOC_CHAPTERS, *TOC_LABS])
def test_solutions_are_folded(page_facts, entry):
    f = page_facts(entry)
    solutions = [d for d in f["dropdowns"] if d[1].startswith("Solution")]
    assert solutions, f"{entry}: no folded solution (:::{{dropdown}} Solution)"
    assert not any(is_open for is_open, _ in solutions), f"{entry}: a solution is shown unfolded"
    assert f.get("dropdown_opens") is True, f"{entry}: clicking a solution did not unfold it"


@pytest.mark.parametrize("entry", [TOC_FILES[0], *TOC_CHAPTERS, *WORKSHOP_FILES])
def test_colab_link(page_facts, entry):
    hrefs = page_facts(entry)["colab"]
    assert hrefs, f"{entry}: no Colab launch link"
    cfg = load_yaml("_config.yml")["repository"]
    repo_path = urlparse(cfg["url"]).path.strip("/")
    prefix = f"https://colab.research.google.com/github/{repo_path}/blob/{cfg['branch']}/"
    for href in set(hrefs):
        assert href.endswith(".ipynb"), f"{entry}: Colab link {href} does not open an .ipynb"
        assert href.startswith(prefix), f"{entry}: Colab link {href} does not start with {prefix}"
        rel = href[len(prefix):]
        assert rel == f"{entry}.ipynb", f"{entry}: Colab link points to {rel}, expected {entry}.ipynb"
        assert (REPO / rel).is_file(), f"{entry}: Colab link points to {rel}, which is not in the repository"
        if shutil.which("git") and (REPO / ".git").exists():
            ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", rel]).returncode == 0
            assert not ignored, f"{entry}: {rel} is git-ignored, so Colab would not find it on GitHub"


def test_widgets_render(page_facts, npm_cdn):
    """Every saved widget view on every page renders (from the widget state saved at build time)."""
    cdn, why = npm_cdn
    facts = [page_facts(e) for e in TOC_FILES]
    pages = [f for f in facts if f["widget_views"]]
    if not pages:
        pytest.skip("no page of the book displays an ipywidget")
    if cdn is None:
        _skip_or_fail(f"widget JS not available offline: {why}")
    for f in pages:
        assert f["widgets_rendered"] is True, (f"{f['entry']}: {f['widget_views']} widget view(s) saved in "
                                               f"the page, but they did not render: {f['widgets_rendered']}")


def test_landing_page_shows_the_point(page_facts, site):
    f = page_facts(TOC_FILES[0])
    assert f["figures"] or f["interactive"], "the landing page shows no figure"
    html = (site / "index.html").read_text(encoding="utf-8")
    if 'http-equiv="Refresh"' in html or "http-equiv=\"refresh\"" in html.lower():
        html = (site / f"{TOC_FILES[0]}.html").read_text(encoding="utf-8")
    assert re.search(r'<table class="[^"]*\bperfkit-striking\b', html), "the landing page has no table of striking rules"
    assert re.search(r'<table class="[^"]*\bperfkit-chapters\b', html), "the landing page has no chapter list"
    assert "In short:" in html and "rules across 7 chapters" in html, "the landing page has no one-sentence summary"
    assert 'href="rules.html"' in html, "the landing page does not link the page of all rules"
    for chapter in ("02_gemm", "03_fully_connected", "09_check_your_model"):
        assert f'href="chapters/{chapter}.html"' in html, f"the chapter list does not link {chapter}"
    assert f["list_top_px"] is not None and f["list_top_px"] / SCREEN_PX <= LANDING_MAX_SCREENS, (
        f"the chapter list starts {f['list_top_px'] / SCREEN_PX:.1f} screens down (at most {LANDING_MAX_SCREENS})")


def test_rules_page_links_every_rule(site):
    html = (site / "rules.html").read_text(encoding="utf-8")
    table = re.search(r'<table class="[^"]*\bperfkit-verdicts\b.*?</table>', html, re.S)
    assert table, "rules.html has no table of all rules"
    rows = re.findall(r'<tr class="evidence-[^"]*">(.*?)</tr>', table.group(0), re.S)
    assert len(rows) >= 50, f"rules.html shows {len(rows)} rules"
    unlinked = [r[:80] for r in rows if not re.search(r'<td class="text"><a href="chapters/\d\d_\w+\.html#[\w-]+">', r)]
    assert not unlinked, f"rules without a link to their section: {unlinked[:3]}"


#: A screen of the reader's window (1280 × 900), and issue 41's limits in screens: the reader's
#: book (every page but the workshop kit's) and, for teachers, the teaching page and each lab.
SCREEN_PX = 900
LANDING_MAX_SCREENS, CHAPTER_MAX_SCREENS, BOOK_MAX_SCREENS = 3.0, 20.0, 150.0
TEACH_MAX_SCREENS, LAB_MAX_SCREENS = 12.0, 10.0


@pytest.mark.parametrize("entry", TOC_CHAPTERS)
def test_chapter_fits_twenty_screens(page_facts, entry):
    screens = page_facts(entry)["height_px"] / SCREEN_PX
    assert screens <= CHAPTER_MAX_SCREENS, f"{entry} is {screens:.1f} screens at 1280 × 900 (at most {CHAPTER_MAX_SCREENS:g})"


def test_book_fits_its_screens(page_facts):
    """The reader's book: the workshop kit is a part for teachers, with limits of its own (below)."""
    screens = {e: page_facts(e)["height_px"] / SCREEN_PX for e in TOC_FILES if e not in WORKSHOP_FILES}
    total = sum(screens.values())
    longest = sorted(screens.items(), key=lambda kv: -kv[1])[:3]
    assert total <= BOOK_MAX_SCREENS, f"the book is {total:.0f} screens (at most {BOOK_MAX_SCREENS:g}); longest: {longest}"


@pytest.mark.parametrize("entry", WORKSHOP_FILES)
def test_workshop_page_fits_its_screens(page_facts, entry):
    """A teacher reads the plan in a few minutes; a lab fits a block (and its slides a projector)."""
    limit = TEACH_MAX_SCREENS if entry == "teach" else LAB_MAX_SCREENS
    screens = page_facts(entry)["height_px"] / SCREEN_PX
    assert screens <= limit, f"{entry} is {screens:.1f} screens at 1280 × 900 (at most {limit:g})"


@pytest.mark.parametrize("entry", TOC_FILES)
def test_no_noisy_timings_box(page_facts, entry):
    """The build machine's live timings are not the page's content (a Try-it cell keeps its output out)."""
    noisy = [t[:120] for _, t in page_facts(entry)["notes"] if "Noisy timings" in t]
    noisy += [t[:120] for t in page_facts(entry)["outputs"] if "had noisy timings" in t]
    assert not noisy, f"{entry}: a 'Noisy timings' box from a live run on the build machine: {noisy}"


@pytest.mark.parametrize("entry", TOC_FILES)
def test_every_table_says_what_it_rests_on(page_facts, entry):
    bare = page_facts(entry)["uncaptioned"]
    assert not bare, (f"{entry}: {len(bare)} tables without a caption saying what they rest on "
                      f"(pk.table(frame, source) or caption=...): {bare[:3]}")


@pytest.mark.parametrize("entry", TOC_FILES)
def test_no_column_narrower_than_its_longest_word(page_facts, entry):
    for width, cells in page_facts(entry)["squeezed"].items():
        assert not cells, f"{entry} at {width} px: words wrap letter by letter in {len(cells)} cells: {cells[:5]}"


@pytest.mark.parametrize("entry", TOC_FILES)
def test_interactive_text_is_whole(page_facts, entry):
    """No title or annotation of an interactive figure is cut by its edge or runs into another title."""
    bad = page_facts(entry).get("plotly_text") or []
    assert not bad, f"{entry}: {bad[:5]}"


# A page's own HTML (figures' data included, images and the shared JS not): what a reader on a slow
# connection downloads per page beyond what the browser caches.
MAX_PAGE_HTML_BYTES = 1_500_000


@pytest.mark.parametrize("entry", TOC_FILES)
def test_page_weight(site, entry):
    size = (site / f"{entry}.html").stat().st_size
    assert size < MAX_PAGE_HTML_BYTES, (f"{entry}.html is {size / 1e6:.2f} MB (limit "
                                        f"{MAX_PAGE_HTML_BYTES / 1e6:.1f} MB): fewer or smaller figure states")


# --------------------------------------------------------------------------------------------
# The labs' slide decks: perfkit/book/slides.py (a Sphinx extension of the build) writes
# _build/html/slides/<name>.slides.html for every labs/ page of the table of contents.


def _deck_entry(entry: str) -> str:
    """The site path of lab ``entry``'s deck without ``.html`` (``slides/01_name.slides``)."""
    from perfkit.book.slides import deck_path

    return deck_path("", entry).as_posix().removesuffix(".html")


def test_every_lab_has_a_slide_deck_linked_from_its_page(site):
    import posixpath

    page = "teach"
    html = (site / f"{page}.html").read_text(encoding="utf-8")
    hrefs = {h.removeprefix("./") for h in re.findall(r'href="([^"#]*)', html)}
    for entry in TOC_LABS:
        deck = f"{_deck_entry(entry)}.html"
        assert (site / deck).is_file(), f"{entry}: no slide deck {deck} in the built site (perfkit.book.slides)"
        rel = posixpath.relpath(deck, posixpath.dirname(page) or ".")
        assert rel in hrefs, (f"{page}.html does not link {rel}, the slides of {entry} (link it with "
                              f'<a href="{rel}">: a Markdown link to a file that is no page fails the build, -W)')


@pytest.mark.slow
@pytest.mark.parametrize("entry", TOC_LABS)
def test_slide_deck_runs_in_the_browser(open_page, npm_cdn, entry):
    """reveal.js starts in the deck (answered from its npm tarball), shows ≥ 2 slides and moves on a key."""
    cdn, why = npm_cdn
    if cdn is None:
        _skip_or_fail(f"the decks' reveal.js is not available offline: {why}")
    lp = open_page(_deck_entry(entry))
    page = lp.page
    try:
        try:
            page.wait_for_selector(".reveal.ready", state="attached", timeout=PAGE_TIMEOUT_MS)
        except Exception as e:  # playwright TimeoutError
            pytest.fail(f"{entry}: reveal.js did not start in its deck ({e}); requests aborted: {lp.blocked}")
        n = page.evaluate("() => document.querySelectorAll('.reveal .slides section:not(:has(section))').length")
        assert n >= 2, f"{entry}: its deck has {n} slide(s)"
        before = page.evaluate("() => location.hash")
        page.keyboard.press("n")  # reveal.js: next slide
        page.wait_for_function("h => location.hash !== h", arg=before, timeout=PAGE_TIMEOUT_MS)
        # This test aborts MathJax (not among the npm tarballs); nbconvert's slide-change hook then
        # finds no MathJax. Any other script error counts.
        mathjax_blocked = any("mathjax" in url.lower() for url in lp.blocked)
        errors = [e for e in lp.page_errors if not (mathjax_blocked and "MathJax is not defined" in e)]
        assert not errors, f"{entry}: JavaScript errors in its deck: {errors}"
    finally:
        page.context.close()
