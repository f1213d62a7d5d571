"""Helpers for tests/book/test_book.py: the table of contents, building the book, serving the
built site on loopback, and answering the widget CDN URLs from local npm tarballs.

Nothing here fetches anything from the network except ``npm pack`` of the pinned JS packages the
site loads (widgets, Plotly, the slide decks' reveal.js; from the npm registry, only if they are not
cached yet).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import yaml

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# The JS the book loads from jsdelivr (nb_ipywidgets_js in _config.yml; Plotly), as npm packages.
# Plotly's basic bundle at the version the installed plotly renders for (perfkit.interactive).
def _plotly_js_package() -> str:
    from plotly.offline import get_plotlyjs_version

    return f"plotly.js-basic-dist-min@{get_plotlyjs_version()}"


WIDGET_NPM_PACKAGES = ("@jupyter-widgets/html-manager@1.0.6", "requirejs@2.3.7", _plotly_js_package())


def npm_packages() -> tuple[str, ...]:
    """Every npm package (name@version) the built site loads from jsdelivr: the widget and Plotly JS
    of the pages, and what the labs' reveal.js slide decks load (perfkit.book.slides.CDN_PACKAGES:
    reveal.js, jQuery, require.js). Imported when asked for: perfkit.book.slides imports Sphinx."""
    from perfkit.book.slides import CDN_PACKAGES

    return tuple(dict.fromkeys((*WIDGET_NPM_PACKAGES, *CDN_PACKAGES)))


JSDELIVR_NPM = "https://cdn.jsdelivr.net/npm/"


# --------------------------------------------------------------------------------------------
# Table of contents and config


def load_yaml(name: str) -> dict:
    with open(REPO / name, encoding="utf-8") as f:
        return yaml.safe_load(f)


def toc_files() -> list[str]:
    """Every `file:` entry of _toc.yml (root first), without extension, in reading order."""
    toc = load_yaml("_toc.yml")
    out = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                out.append(node["file"])
            for key in ("chapters", "sections", "parts"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk({k: v for k, v in toc.items() if k in ("chapters", "parts")})
    return [re.sub(r"\.(md|ipynb)$", "", f) for f in out]


def toc_chapters() -> list[str]:
    """The toc entries that are notebook chapters (``chapters/...``)."""
    return [f for f in toc_files() if f.startswith("chapters/")]


def chapter_sources() -> list[Path]:
    return sorted((REPO / "chapters").glob("*.md"))


# --------------------------------------------------------------------------------------------
# Building


@dataclass
class BuildResult:
    returncode: int
    log: str
    out_dir: Path  # the --path-output folder; the site is out_dir / "_build" / "html"
    seconds: float
    #: The jupyter-cache the build read executed chapters from (``execute_notebooks: cache``), or
    #: None for a build that executed every page (``force``, as in the README).
    cache_dir: Path | None = None
    html: Path = field(init=False)
    #: The pages the build executed, and {page: cache record id} of the pages it took from the cache
    #: (from myst-nb's lines in the build log).
    executed: list[str] = field(init=False)
    cached: dict[str, int] = field(init=False)

    def __post_init__(self):
        from notebook_cache import parse_build_log

        self.html = self.out_dir / "_build" / "html"
        self.executed, self.cached = parse_build_log(self.log)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and (self.html / "index.html").is_file()

    def log_tail(self, n: int = 120) -> str:
        return "\n".join(self.log.splitlines()[-n:])

    def executed_notebook(self, entry: str) -> dict | None:
        """The executed notebook of page ``entry`` (``chapters/02_gemm``), outputs included: the
        build's ``_build/jupyter_execute/<entry>.ipynb``; for a page taken from the cache, myst-nb
        writes that file without outputs, so they are merged in from the cached notebook. None if
        the build wrote no notebook for the page."""
        import nbformat

        from notebook_cache import merged_from_cache

        path = self.out_dir / "_build" / "jupyter_execute" / f"{entry}.ipynb"
        if not path.is_file():
            return None
        nb = nbformat.read(path, as_version=4)
        return merged_from_cache(nb, self.cache_dir) if entry in self.cached else nb


def book_config_for_cache(cache_dir: Path, folder: Path) -> Path:
    """A copy of _config.yml in ``folder`` whose ``execute`` section takes executed notebooks from
    the jupyter-cache ``cache_dir`` (``execute_notebooks: cache``); every other key is unchanged
    (none of them is a path relative to the config file). Pages with no match in the cache are
    executed (and added to it)."""
    cfg = load_yaml("_config.yml")
    cfg.setdefault("execute", {})
    cfg["execute"]["execute_notebooks"] = "cache"
    cfg["execute"]["cache"] = str(cache_dir)
    path = folder / "_config.cache.yml"
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(cfg, f, sort_keys=False, allow_unicode=True)
    return path


def build_book(timeout_s: float, cache_dir: Path | None = None) -> BuildResult:
    """`jupyter-book build <repo> --all -W -n --keep-going --path-output <tmp>`.

    With ``cache_dir`` (a jupyter-cache holding the chapters nbval executed in this session), the
    build uses a copy of _config.yml that takes them from it (:func:`book_config_for_cache`) and
    executes only the other pages; without, it is the README's build, which executes every page.

    The output folder is world-readable, because linkchecker run as root drops to `nobody`.
    """
    import time

    out_dir = Path(tempfile.mkdtemp(prefix="perfkit-book-"))
    out_dir.chmod(0o755)
    env = dict(os.environ)
    # As on a headless server or CI image: every figure must show whatever the backend (perfkit's
    # figures show themselves as a cell's result), so the build uses the harshest one, Agg.
    env["MPLBACKEND"] = "Agg"
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    cmd = [jb or "jupyter-book", "build", str(REPO), "--all", "-W", "-n", "--keep-going",
           "--path-output", str(out_dir)]
    if cache_dir is not None:
        cmd += ["--config", str(book_config_for_cache(cache_dir, out_dir))]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout_s)
        rc, log = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, log = -1, out + f"\n[test_book] build timed out after {timeout_s:.0f} s"
    seconds = time.perf_counter() - t0
    # Error logs of failed cells (reports/*.err.log) are the most useful part on failure.
    reports = out_dir / "_build" / "html" / "reports"
    if reports.is_dir():
        for p in sorted(reports.glob("**/*.log")):
            log += f"\n----- {p.relative_to(out_dir)} -----\n" + p.read_text(errors="replace")
    make_world_readable(out_dir)
    return BuildResult(rc, log, out_dir, seconds, cache_dir=cache_dir)


def make_world_readable(root: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | 0o444)


# --------------------------------------------------------------------------------------------
# Serving


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature from the base class
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the browser closed the page before the answer was written: not an error
        super().handle_error(request, client_address)


class SiteServer:
    """The built site on http://127.0.0.1:<free port>/ in a background thread."""

    def __init__(self, root: Path):
        handler = functools.partial(_QuietHandler, directory=str(root))
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="site-server", daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


# --------------------------------------------------------------------------------------------
# Widget JS from local npm tarballs


def widget_vendor_dir() -> Path:
    return Path(os.environ.get("PERFKIT_WIDGET_VENDOR",
                               Path.home() / ".cache" / "perfkit-book" / "npm"))


def _tarball_name(spec: str) -> str:
    # npm pack names: @scope/name@v -> scope-name-v.tgz
    name, version = spec.rsplit("@", 1)
    return f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"


def ensure_widget_vendor(timeout_s: float = 180) -> tuple[Path | None, str]:
    """Return (folder with the npm tarballs, "") or (None, why not)."""
    folder = widget_vendor_dir()
    packages = npm_packages()
    missing = [s for s in packages if not (folder / _tarball_name(s)).is_file()]
    if not missing:
        return folder, ""
    npm = shutil.which("npm")
    if npm is None:
        return None, ("npm is not installed, so the widget JS cannot be fetched with "
                      f"`npm pack {' '.join(packages)}` into {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run([npm, "pack", *missing, "--pack-destination", str(folder)], cwd=folder,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"`npm pack {' '.join(missing)}` timed out after {timeout_s:.0f} s"
    still = [s for s in packages if not (folder / _tarball_name(s)).is_file()]
    if proc.returncode != 0 or still:
        return None, (f"`npm pack {' '.join(missing)}` failed (exit {proc.returncode}): "
                      f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    return folder, ""


class NpmCdn:
    """Answers https://cdn.jsdelivr.net/npm/<name>@<version>/<path> from npm tarballs."""

    def __init__(self, folder: Path):
        self.files: dict[tuple[str, str], dict[str, bytes]] = {}
        for tgz in folder.glob("*.tgz"):
            with tarfile.open(tgz) as tar:
                members = {}
                for m in tar.getmembers():
                    if m.isfile() and m.name.startswith("package/"):
                        members[m.name[len("package/"):]] = tar.extractfile(m).read()
            meta = json.loads(members["package.json"])
            self.files[(meta["name"], meta["version"])] = members

    def lookup(self, url: str) -> bytes | None:
        if not url.startswith(JSDELIVR_NPM):
            return None
        rest = urlparse(url).path[len("/npm/"):]
        m = re.match(r"^(@[^/]+/[^@/]+|[^@/]+)@([^/]+)/(.*)$", rest)
        if not m:
            return None
        pkg = self.files.get((m.group(1), m.group(2)))
        return None if pkg is None else pkg.get(m.group(3))


CONTENT_TYPES = {".js": "application/javascript", ".css": "text/css", ".json": "application/json",
                 ".map": "application/json", ".woff": "font/woff", ".woff2": "font/woff2",
                 ".ttf": "font/ttf", ".eot": "application/vnd.ms-fontobject", ".svg": "image/svg+xml"}


def content_type(url: str) -> str:
    return CONTENT_TYPES.get(os.path.splitext(urlparse(url).path)[1], "application/octet-stream")
