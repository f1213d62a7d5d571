"""``perfkit published fetch``: obtain each published table from its public repository at the pinned commit.

For every catalogue entry, :func:`fetch` gets the pinned commits into a bare cache repository (plain ``git``:
``git fetch --depth 1 <url> <commit>``, a full fetch if the server refuses that), extracts the rows with
the entry's extractor (:data:`EXTRACTORS`; they read files with ``git show <commit>:<path>`` and list a
folder with ``git ls-tree``), checks that every row names its ``owner/repo/path@commit`` (a path the entry
lists, or a file under a folder it lists), and writes the CSV into the published-data folder,
atomically, if its SHA-256 is the catalogue's. Nothing is downloaded but the repositories' own files.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterable, Mapping

import pandas as pd

from .._files import write_atomic
from . import extract_deepbench, extract_gemm_tables, extract_kernel_tables, extract_text, extract_xla
from .catalog import CATALOG, PublishedSource
from .extract_text import csv_bytes, owner_repo

#: source name → extractor(entry, read) where read(commit, path) -> bytes (and, where an extractor needs them,
#: read.log, read.date and read.files: see :class:`GitReader`).
EXTRACTORS: Mapping[str, Callable[[PublishedSource, Callable[[str, str], bytes]], pd.DataFrame]] = MappingProxyType({
    "deepbench_gemm": extract_deepbench.extract_deepbench_gemm,
    "deepbench_conv": extract_deepbench.extract_deepbench_conv,
    "deepbench_rnn": extract_deepbench.extract_deepbench_rnn,
    "deepbench_allreduce": extract_deepbench.extract_deepbench_allreduce,
    "xla_h100_gemm": extract_xla.extract_xla_gemm,
    "xla_h100_collectives": extract_xla.extract_xla_collectives,
    "liger_memory_bound": extract_text.extract_liger,
    "gpu_benches_stream": extract_text.extract_gpu_benches_stream,
    "gpu_benches_small_kernels": extract_text.extract_gpu_benches_small,
    "deepgemm_fp8": extract_text.extract_deepgemm,
    "mamf_newest": extract_gemm_tables.extract_mamf,
    "aiter_gemm": extract_gemm_tables.extract_aiter_gemm,
    "cudnn_sdpa_training": extract_kernel_tables.extract_cudnn_sdpa_training,
    "hipkittens": extract_kernel_tables.extract_hipkittens,
})
#: Columns of the table :func:`fetch` returns.
RESULT_COLUMNS = ("name", "path", "rows", "sha256", "expected_sha256", "matches", "written")
_SHA = re.compile(r"[0-9a-f]{40}")


def default_into() -> Path:
    """Where tables go by default: ``$PERFKIT_PUBLISHED``, else ``~/.cache/perfkit/published``."""
    env = os.environ.get("PERFKIT_PUBLISHED")
    return Path(env) if env else Path.home() / ".cache" / "perfkit" / "published"


def default_cache() -> Path:
    """Where the bare cache repositories live: ``~/.cache/perfkit/git``."""
    return Path.home() / ".cache" / "perfkit" / "git"


# ---------------------------------------------------------------------------------------------- git

def _git(args: list[str], what: str) -> bytes:
    """Run ``git args`` and return its stdout; ``RuntimeError`` naming ``what`` and git's stderr on failure."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(["git", *args], capture_output=True, env=env, stdin=subprocess.DEVNULL)
    except FileNotFoundError as e:
        raise RuntimeError(f"{what}: git is not installed (perfkit published fetch runs plain `git`)") from e
    if done.returncode != 0:
        cmd = " ".join(a for a in args if not a.startswith("+refs/"))
        raise RuntimeError(f"{what}: `git {cmd}` failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


class GitReader:
    """``read(commit, path) -> bytes`` over a bare cache repository of one source repository.

    Commits are fetched on first use (depth 1; a full fetch if the server refuses a commit by SHA);
    :meth:`log` deepens the history when it needs it. ``url`` is where to fetch from (the repository
    itself, or a mirror: a local path or another URL). The cache is a partial clone (``blob:none``):
    only commits and trees are fetched, and ``git show`` fetches the few files read, so a large
    repository (openxla/xla) costs megabytes, not its whole tree. A server without filters sends
    everything, which works too. :meth:`files` lists a folder at a commit (``git ls-tree``, trees only).
    """

    def __init__(self, repository: str, url: str, cache: str | os.PathLike) -> None:
        self.repository, self.url = repository, url
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", re.sub(r"^[a-z+]+://", "", repository).rstrip("/")).strip("_")
        self.path = Path(cache) / f"{name.removesuffix('.git')}.git"
        self._complete: set[str] = set()

    def _run(self, args: list[str], what: str) -> bytes:
        return _git(["-C", str(self.path), *args], f"{self.repository}: {what}")

    def _has(self, commit: str) -> bool:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        return subprocess.run(["git", "-C", str(self.path), "cat-file", "-e", f"{commit}^{{commit}}"],
                              capture_output=True, env=env).returncode == 0

    def _shallow(self) -> bool:
        return (self.path / "shallow").is_file()

    def ensure(self, commit: str) -> None:
        """Fetch ``commit`` into the cache unless it is there; ``RuntimeError`` naming repository, commit, stderr."""
        if not _SHA.fullmatch(commit):
            raise ValueError(f"commit must be a full 40-hex-digit SHA, got {commit!r}")
        if not (self.path / "HEAD").is_file():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _git(["init", "--bare", "--quiet", str(self.path)], f"{self.repository}: creating the cache repository")
            for key, value in (("core.repositoryformatversion", "1"), ("extensions.partialClone", "origin"),
                               ("remote.origin.promisor", "true"), ("remote.origin.partialclonefilter", "blob:none")):
                self._run(["config", key, value], "configuring the cache repository")
        self._run(["config", "remote.origin.url", self.url], "configuring the cache repository")
        if self._has(commit):
            return
        repo = ["-C", str(self.path)]
        try:
            _git([*repo, "fetch", "--quiet", "--no-tags", "--filter=blob:none", "--depth", "1", "origin", commit],
                 "fetch by SHA")
            return
        except RuntimeError as e:
            shallow_error = str(e)
        try:  # servers that refuse a commit by SHA: fetch every branch and tag instead
            _git([*repo, "fetch", "--quiet", "--no-tags", *(["--unshallow"] if self._shallow() else []), "origin",
                  "+refs/heads/*:refs/perfkit/heads/*", "+refs/tags/*:refs/perfkit/tags/*"], "full fetch")
        except RuntimeError as e:
            raise RuntimeError(f"{self.repository}: cannot fetch commit {commit} from {self.url}. {shallow_error}. "
                               f"{e}") from None
        if not self._has(commit):
            raise RuntimeError(f"{self.repository}: commit {commit} is not in {self.url} (not on any branch or "
                               f"tag): {shallow_error}")

    def __call__(self, commit: str, path: str) -> bytes:
        """The bytes of ``path`` at ``commit``; ``FileNotFoundError`` if the path is not in that commit."""
        self.ensure(commit)
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        done = subprocess.run(["git", "-C", str(self.path), "show", "--no-textconv", f"{commit}:{path}"],
                              capture_output=True, env=env)
        if done.returncode != 0:
            err = done.stderr.decode(errors="replace").strip()
            if "does not exist in" in err or "exists on disk, but not in" in err:
                raise FileNotFoundError(f"{self.repository}: {path} is not in commit {commit}")
            raise RuntimeError(f"{self.repository}: `git show {commit}:{path}` failed: {err}")
        return done.stdout

    def files(self, commit: str, folder: str) -> list[str]:
        """Paths (from the repository root) of every file under ``folder`` at ``commit``, at any depth, in git's
        order; empty if the folder is not in that commit."""
        self.ensure(commit)
        out = self._run(["ls-tree", "-r", "-z", "--name-only", commit, "--", folder.rstrip("/") + "/"],
                        f"files under {folder} at {commit}")
        return [p for p in out.decode("utf-8", errors="surrogateescape").split("\0") if p]

    def log(self, commit: str, *paths: str) -> list[str]:
        """Commits at or before ``commit`` that touched ``paths``, newest first (fetches the whole history once)."""
        self.ensure(commit)
        if commit not in self._complete:
            if self._shallow():
                self._run(["fetch", "--quiet", "--no-tags", "--unshallow", "origin", commit],
                          f"fetching the history of commit {commit}")
            if self._shallow():
                boundary = set(self.path.joinpath("shallow").read_text().split())
                ancestors = set(self._run(["rev-list", commit], "listing history").decode().split())
                if boundary & ancestors:
                    raise RuntimeError(f"{self.repository}: the history of {commit} is still cut off after --unshallow")
            self._complete.add(commit)
        out = self._run(["log", "--format=%H", commit, "--", *paths], f"history of {', '.join(paths)} at {commit}")
        return out.decode().split()

    def date(self, commit: str) -> str:
        """The author date of ``commit``, ``YYYY-MM-DD`` in the author's time zone."""
        self.ensure(commit)
        return self._run(["show", "-s", "--format=%ad", "--date=short", commit], f"date of {commit}").decode().strip()


# ---------------------------------------------------------------------------------------------- checks

def _folder(name: str, value: object, default: Path) -> Path:
    if value is None:
        return default
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)) or not str(value):
        raise TypeError(f"{name} must be a folder path (str or os.PathLike), got {value!r} ({type(value).__name__})")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name} must be a folder, but {path} is a file")
    return path


def _catalog(catalog: object) -> Mapping[str, PublishedSource]:
    if not isinstance(catalog, Mapping) or not all(isinstance(e, PublishedSource) for e in catalog.values()):
        raise TypeError(f"catalog must map names to PublishedSource entries (like perfkit.published_data.CATALOG), "
                        f"got {type(catalog).__name__}")
    for key, e in catalog.items():
        if key != e.name:
            raise ValueError(f"catalog: key {key!r} holds the entry named {e.name!r}")
    return catalog


def _names(names: object, catalog: Mapping[str, PublishedSource]) -> list[str]:
    if names is None:
        wanted = list(catalog)
    elif isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
        raise TypeError(f"names must be an iterable of catalogue names such as ['xla_h100_gemm'] (or None for all), "
                        f"got {names!r}")
    else:
        wanted = list(dict.fromkeys(names))
        bad = [n for n in wanted if not isinstance(n, str)]
        if bad:
            raise TypeError(f"names must be strings, got {bad[0]!r} ({type(bad[0]).__name__})")
    unknown = [n for n in wanted if n not in catalog]
    if unknown:
        raise LookupError(f"unknown published source {', '.join(map(repr, unknown))}; known: {', '.join(catalog)}")
    no_extractor = [n for n in wanted if n not in EXTRACTORS]
    if no_extractor:
        raise ValueError(f"no extractor for {', '.join(map(repr, no_extractor))}; "
                         f"perfkit can fetch: {', '.join(EXTRACTORS)}")
    return wanted


def _mirrors(mirrors: object, catalog: Mapping[str, PublishedSource]) -> dict[str, str]:
    if mirrors is None:
        return {}
    if not isinstance(mirrors, Mapping):
        raise TypeError(f"mirrors must map repository URLs to a local path or URL, got {type(mirrors).__name__}")
    known = {e.repository for e in catalog.values()}
    out = {}
    for url, where in mirrors.items():
        if not isinstance(url, str) or isinstance(where, bytes) or not isinstance(where, (str, os.PathLike)):
            raise TypeError(f"mirrors must map repository URLs (str) to a local path or URL (str or os.PathLike), "
                            f"got {url!r}: {where!r}")
        if url not in known:
            raise ValueError(f"mirrors: {url!r} is no catalogued repository; known: {', '.join(sorted(known))}")
        if not str(where):
            raise ValueError(f"mirrors: empty path or URL for {url}")
        local = Path(where).expanduser()
        out[url] = str(local.resolve()) if local.exists() else str(where)
    return out


def _listed(path: str, paths: Iterable[str]) -> bool:
    """``path`` is one of ``paths`` or a file under one of them (a catalogue entry may list folders)."""
    if ".." in path.split("/"):
        return False
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in paths)


def check_sources(entry: PublishedSource, frame: pd.DataFrame) -> None:
    """Every row names ``owner/repo/path@commit`` of the entry's repository, paths (a listed file, or a file
    under a listed folder) and commits; the entry's columns are there."""
    missing = [c for c in entry.columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{entry.name}: the extracted table lacks the columns {missing}")
    if "source" not in frame.columns:
        raise ValueError(f"{entry.name}: the extracted table has no source column")
    pattern = re.compile(re.escape(owner_repo(entry)) + r"/(.+)@([0-9a-f]{40})")
    for i, s in enumerate(frame["source"]):
        m = pattern.fullmatch(s) if isinstance(s, str) else None
        if m is None or not _listed(m.group(1), entry.paths) or m.group(2) not in entry.commits:
            raise ValueError(f"{entry.name}: row {i} has source {s!r}, expected {owner_repo(entry)}/<one of, or a "
                             f"file under one of, {list(entry.paths)}>@<one of {list(entry.commits)}>")


# ---------------------------------------------------------------------------------------------- fetch

def fetch(names: Iterable[str] | None = None, *, into: str | os.PathLike | None = None,
          mirrors: Mapping[str, str] | None = None, catalog: Mapping[str, PublishedSource] = CATALOG,
          allow_mismatch: bool = False, cache: str | os.PathLike | None = None) -> pd.DataFrame:
    """Fetch, extract and install published tables; one result row per source.

    ``names``: catalogue names (None: all). ``into``: the published-data folder (default
    ``$PERFKIT_PUBLISHED``, else ``~/.cache/perfkit/published``); each table goes to ``into/entry.file``.
    ``mirrors``: repository URL → local path or URL to fetch from instead. A table whose SHA-256 is not the
    catalogue's is not installed unless ``allow_mismatch``. ``cache``: the bare cache repositories (default
    ``~/.cache/perfkit/git``). Returns ``name, path, rows, sha256, expected_sha256, matches, written``.
    Raises ``LookupError`` for an unknown name, ``RuntimeError`` when git fails.
    """
    catalog = _catalog(catalog)
    wanted = _names(names, catalog)
    dest = _folder("into", into, default_into())
    cache_dir = _folder("cache", cache, default_cache())
    where = _mirrors(mirrors, catalog)
    if not isinstance(allow_mismatch, bool):
        raise TypeError(f"allow_mismatch must be True or False, got {allow_mismatch!r}")
    from tqdm import tqdm

    readers: dict[str, GitReader] = {}
    results = []
    for name in tqdm(wanted, desc="published fetch", unit="table", disable=len(wanted) < 2, file=sys.stderr):
        entry = catalog[name]
        target = dest / entry.file
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == entry.sha256:
            results.append({"name": name, "path": str(target), "rows": len(pd.read_csv(target)),
                            "sha256": entry.sha256, "expected_sha256": entry.sha256, "matches": True,
                            "written": False})  # already there, the same bytes: nothing to download
            continue
        repo = entry.repository
        reader = readers.setdefault(repo, GitReader(repo, where.get(repo, repo), cache_dir))
        for commit in entry.commits:
            reader.ensure(commit)
        frame = EXTRACTORS[name](entry, reader)
        check_sources(entry, frame)
        data = csv_bytes(frame)
        digest = hashlib.sha256(data).hexdigest()
        matches = digest == entry.sha256
        if not matches:
            warnings.warn(f"{name}: the extracted table's SHA-256 is {digest}, the catalogue's {entry.sha256}"
                          + ("; installed anyway (allow_mismatch)" if allow_mismatch else "; not installed"),
                          stacklevel=2)
        if matches or allow_mismatch:
            write_atomic(target, data)
        results.append({"name": name, "path": str(target), "rows": len(frame), "sha256": digest,
                        "expected_sha256": entry.sha256, "matches": matches, "written": matches or allow_mismatch})
    return pd.DataFrame(results, columns=list(RESULT_COLUMNS))


def main(argv: list[str] | None = None) -> int:
    """CLI after ``published fetch``: ``[NAME ...] [--into DIR] [--mirror URL=PATH ...] [--allow-mismatch]``.

    Returns 0 when every table was installed, 1 when a checksum mismatch kept one out, 2 on an error.
    """
    p = argparse.ArgumentParser(prog="perfkit published fetch",
                                description="Download each published table's source at its pinned commit, extract "
                                            "the rows and install the CSV if its SHA-256 is the catalogue's.")
    p.add_argument("names", nargs="*", metavar="NAME", help=f"tables to fetch (default: all): {', '.join(CATALOG)}")
    p.add_argument("--into", metavar="DIR", help="published-data folder (default: $PERFKIT_PUBLISHED, else "
                                                 "~/.cache/perfkit/published)")
    p.add_argument("--mirror", action="append", default=[], metavar="URL=PATH",
                   help="fetch the repository URL from PATH (a local clone or another URL); repeatable")
    p.add_argument("--cache", metavar="DIR", help="bare git cache repositories (default: ~/.cache/perfkit/git)")
    p.add_argument("--allow-mismatch", action="store_true", help="install a table even if its SHA-256 differs")
    args = p.parse_args(argv)
    mirrors = {}
    for m in args.mirror:
        url, sep, path = m.partition("=")
        if not sep or not url or not path:
            p.error(f"--mirror takes URL=PATH, got {m!r}")
        mirrors[url] = path
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # mismatches are reported below
            out = fetch(args.names or None, into=args.into, mirrors=mirrors, allow_mismatch=args.allow_mismatch,
                        cache=args.cache)
    except (LookupError, TypeError, ValueError, RuntimeError, OSError, ImportError) as e:
        print(f"perfkit published fetch: error: {e}", file=sys.stderr)
        return 2
    for r in out.itertuples(index=False):
        state = ("installed" if r.written else "already there" if r.matches else "NOT installed") + (
            "" if r.matches else " (SHA-256 MISMATCH)")
        print(f"{r.name:28s} {r.rows:6d} rows  {state}  {r.path}")
        if not r.matches:
            print(f"    sha256 {r.sha256}, catalogue {r.expected_sha256}")
    if args.into and not os.environ.get("PERFKIT_PUBLISHED"):
        print(f"perfkit reads {args.into} when PERFKIT_PUBLISHED={args.into} is set")
    return 0 if out["written"].all() else 1
