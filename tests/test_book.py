"""The book: chapter pairing, the build, links, and the rendered pages in a real browser.

The book is built once per test session (``built_book`` fixture), into a temporary folder, with
the same command as the README: ``jupyter-book build . --all -W -n --keep-going``. Keep these
tests in one file: with ``pytest -n 2 --dist loadfile`` they then share that one build.

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
        if entry.startswith("chapters/"):
            assert md.is_file(), f"_toc.yml lists {entry} but {md.relative_to(REPO)} is missing"
            assert ipynb.is_file(), (f"_toc.yml lists {entry} but its paired {ipynb.relative_to(REPO)} is "
                                     f"missing: run `jupytext --to ipynb {entry}.md` once and commit it")
        else:
            assert md.is_file() or ipynb.is_file(), f"_toc.yml lists {entry}, which does not exist"


def test_every_chapter_is_in_the_toc():
    unlisted = [md for md in CHAPTER_MDS if md[:-3] not in TOC_CHAPTERS]
    assert not unlisted, f"chapters not in _toc.yml (they would not be built): {unlisted}"
    orphans = [p.relative_to(REPO).as_posix() for p in (REPO / "chapters").glob("*.ipynb")
               if not p.with_suffix(".md").is_file()]
    assert not orphans, f"notebooks without a paired .md (nbval would still run them): {orphans}"


@pytest.mark.parametrize("md", CHAPTER_MDS)
def test_chapter_has_kernelspec(md):
    text = (REPO / md).read_text(encoding="utf-8")
    m = re.match(r"^---\n(.*?)\n---\n", text, flags=re.S)
    assert m, f"{md} has no YAML header; a chapter is a MyST notebook with a kernelspec header"
    header = yaml.safe_load(m.group(1))
    assert header.get("kernelspec", {}).get("name"), (
        f"{md} has no kernelspec in its header, so Jupyter Book would treat it as plain Markdown "
        "(not executed, no Colab button)")
    assert header.get("jupytext", {}).get("text_representation", {}).get("format_name") == "myst", md


@pytest.mark.parametrize("md", CHAPTER_MDS)
def test_first_cell_installs_perfkit_on_colab_only(md):
    """The first code cell is hidden (remove-cell) and pip-installs perfkit only inside Colab."""
    import jupytext

    nb = jupytext.read(REPO / md)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{md} has no code cell"
    first = code[0]
    cfg = load_yaml("_config.yml")["repository"]
    want = f'"perfkit @ git+{cfg["url"]}@{cfg["branch"]}"'
    assert "remove-cell" in first.metadata.get("tags", []), f"{md}: first code cell is not tagged remove-cell"
    assert 'if "google.colab" in sys.modules:' in first.source, f"{md}: first code cell is not guarded for Colab"
    assert f"%pip install -q {want}" in first.source, f"{md}: first code cell does not `%pip install -q {want}`"
    code_lines = [line for line in first.source.splitlines() if not line.lstrip().startswith("#")]
    assert not any("torch" in line for line in code_lines), (
        f"{md}: the Colab install cell must not touch torch (Colab's own CUDA torch must stay)")


@pytest.mark.parametrize("md", CHAPTER_MDS)
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


@pytest.mark.parametrize("md", CHAPTER_MDS)
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


@pytest.fixture(scope="session")
def built_book():
    result = build_book(BUILD_TIMEOUT_S)
    yield result
    shutil.rmtree(result.out_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def site(built_book):
    if not built_book.ok:
        pytest.skip("the book did not build; see test_book_builds")
    return built_book.html


def test_book_builds(built_book):
    print(f"book built in {built_book.seconds:.1f} s into {built_book.out_dir}")
    assert built_book.ok, (f"`jupyter-book build . --all -W -n --keep-going` failed "
                           f"(exit {built_book.returncode}); last lines:\n{built_book.log_tail()}")


def test_every_toc_page_was_built(site):
    for entry in TOC_FILES:
        assert (site / f"{entry}.html").is_file(), f"{entry}.html is missing from the built site"


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


@pytest.fixture
def open_page(browser, server, npm_cdn):
    """open_page("chapters/01_background") -> LoadedPage, hermetic: only 127.0.0.1 is reached."""
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


@pytest.mark.parametrize("entry", TOC_FILES)
def test_page_renders(open_page, entry):
    lp = open_page(entry)
    page = lp.page
    h1 = page.locator("article h1")
    assert h1.count() >= 1 and h1.first.inner_text().strip(), f"{entry}: no <h1> in the article"

    broken = page.evaluate("""() => Array.from(document.querySelectorAll('article img'))
        .filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.getAttribute('src'))""")
    assert not broken, f"{entry}: images that did not load: {broken}"

    errors = page.locator(ERROR_OUTPUT_SELECTORS)
    assert errors.count() == 0, f"{entry}: error output in the page:\n{errors.first.inner_text()[:2000]}"
    tracebacks = page.evaluate("""() => Array.from(document.querySelectorAll('.cell_output'))
        .map(e => e.innerText).filter(t => /Traceback \\(most recent call last\\)/.test(t))""")
    assert not tracebacks, f"{entry}: a cell output contains a traceback:\n{tracebacks[0][:2000]}"
    stderr_errors = page.evaluate("""() => Array.from(document.querySelectorAll('.output.stderr'))
        .map(e => e.innerText).filter(t => /Traceback|\\w*Error\\b/.test(t))""")
    assert not stderr_errors, f"{entry}: stderr output reports an error:\n{stderr_errors[0][:2000]}"

    real = [e for e in lp.page_errors if not any(p.search(e) for p in IGNORED_PAGE_ERRORS)]
    assert not real, f"{entry}: JavaScript errors: {real}"


@pytest.mark.parametrize("entry", TOC_CHAPTERS)
def test_chapter_has_a_figure(open_page, entry):
    page = open_page(entry).page
    n = page.evaluate("""() => Array.from(document.querySelectorAll('article .cell_output img'))
        .filter(img => img.naturalWidth > 0).length""")
    assert n >= 1, f"{entry}: no figure among the cell outputs (every chapter draws at least one)"


@pytest.mark.parametrize("entry", TOC_CHAPTERS)
def test_no_figure_is_shown_twice(open_page, entry):
    # A cell whose last line returns a Figure would otherwise show it twice (inline backend + repr).
    page = open_page(entry).page
    srcs = page.evaluate("""() => Array.from(document.querySelectorAll('article .cell_output img'))
        .map(img => img.getAttribute('src'))""")
    twice = sorted({s for s in srcs if srcs.count(s) > 1})
    assert not twice, f"{entry}: the same figure appears more than once: {twice}"


@pytest.mark.parametrize("entry", TOC_CHAPTERS)
def test_colab_link(open_page, entry):
    page = open_page(entry).page
    hrefs = page.evaluate("""() => Array.from(document.querySelectorAll('a[href*="colab.research.google.com"]'))
        .map(a => a.href)""")
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


def test_widgets_render(open_page, npm_cdn, site):
    """Every saved widget view on every page renders (from the widget state saved at build time)."""
    pages = [e for e in TOC_FILES
             if "application/vnd.jupyter.widget-view+json" in (site / f"{e}.html").read_text(encoding="utf-8")]
    if not pages:
        pytest.skip("no page of the book displays an ipywidget")
    cdn, why = npm_cdn
    if cdn is None:
        _skip_or_fail(f"widget JS not available offline: {why}")
    for entry in pages:
        page = open_page(entry).page
        views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        # Each rendered view is a top-level `.jupyter-widgets` element (controls nest inside it).
        try:
            page.wait_for_function(
                """n => Array.from(document.querySelectorAll('.jupyter-widgets'))
                    .filter(e => !e.parentElement.closest('.jupyter-widgets')).length >= n""",
                arg=views, timeout=PAGE_TIMEOUT_MS)
        except Exception as e:  # playwright TimeoutError
            pytest.fail(f"{entry}: {views} widget view(s) saved in the page, but they did not render: {e}")
