"""Reading published third-party measurements from the published-data folder.

The folder is, in order: the ``root`` argument, ``$PERFKIT_PUBLISHED``, ``../shared/reference/published``
beside a checkout (where this project's build and CI machines keep it), then
``~/.cache/perfkit/published`` (where ``python -m perfkit published fetch`` writes by default). perfkit
ships none of these tables. Every table is checked before use: its metadata (the catalogue entry, or
a ``<name>.json`` beside a table the catalogue does not know), the columns that entry promises, and a
``source`` (``owner/repo/path@commit``) on every row naming the pinned repository and commit.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from .._validate import folder
from ..devices import DeviceSpec, device_spec
from . import deepbench
from .catalog import CATALOG, PublishedSource

#: The environment variable naming the published-data folder.
ENV = "PERFKIT_PUBLISHED"
#: What to do when the folder or a table is missing (said by every error and every "no data" note).
HOW_TO_GET = (f"set ${ENV} to a folder of published tables, or run `python -m perfkit published fetch` "
              "(it downloads each source at its pinned commit and extracts the same rows)")
#: Columns of :func:`published_sources`.
SOURCE_COLUMNS: tuple[str, ...] = ("source", "title", "publisher", "gpus", "devices", "rows", "available",
                                   "date", "commit", "licence", "timing", "chapters", "path")


class PublishedDataMissing(LookupError):
    """The published-data folder, or one table in it, is not there."""


def _checkout_shared() -> Path:
    return Path(__file__).resolve().parents[3] / "shared" / "reference" / "published"


def _user_cache() -> Path:
    return Path.home() / ".cache" / "perfkit" / "published"


def published_root(root: str | os.PathLike | None = None) -> Path:
    """The published-data folder: ``root``, else ``$PERFKIT_PUBLISHED``, else the first that exists of
    ``../shared/reference/published`` beside the checkout and ``~/.cache/perfkit/published``.

    Raises :class:`PublishedDataMissing` (a ``LookupError``) naming ``$PERFKIT_PUBLISHED`` and
    ``perfkit published fetch`` when the folder it settles on does not exist.
    """
    if root is not None:
        path = folder("root", root)
    elif os.environ.get(ENV):
        path = Path(os.environ[ENV])
    else:
        path = next((p for p in (_checkout_shared(), _user_cache()) if p.is_dir()), _user_cache())
    if not path.is_dir():
        raise PublishedDataMissing(f"no published-data folder at {path}: {HOW_TO_GET}")
    return path


def _entry(source: Any, base: Path | None) -> PublishedSource:
    if not isinstance(source, str) or not source:
        raise TypeError(f"source must be a published table's name such as 'xla_h100_gemm' (all of them: "
                        f"pk.published_sources()), got {source!r}")
    if source in CATALOG:
        return CATALOG[source]
    if base is not None and re.fullmatch(r"[A-Za-z0-9_-]+", source):
        for csv in (base / f"{source}.csv", base / "modern" / f"{source}.csv"):
            if csv.is_file():
                return _sidecar(csv)
    raise LookupError(f"unknown published source {source!r}; known: {', '.join(CATALOG)}")


_SIDECAR_KEYS = ("title", "publisher", "repository", "commits", "licence", "timing", "gpu_column", "gpus")


def _sidecar(csv: Path) -> PublishedSource:
    """The metadata of a table the catalogue does not know, from the JSON beside it."""
    meta_path = csv.with_suffix(".json")
    if not meta_path.is_file():
        raise ValueError(f"{csv} has no metadata: perfkit does not know this table and there is no "
                         f"{meta_path.name} beside it (keys: {', '.join(_SIDECAR_KEYS)}); data without "
                         "metadata is not trusted")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{meta_path} is not valid JSON: {e}") from None
    missing = [k for k in _SIDECAR_KEYS if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise ValueError(f"{meta_path} lacks {', '.join(missing)}: data without metadata is not trusted")
    return PublishedSource(
        name=csv.stem, file=str(csv.relative_to(csv.parent.parent if csv.parent.name == "modern" else csv.parent)),
        title=meta["title"], publisher=meta["publisher"], repository=meta["repository"],
        commits=tuple(meta["commits"]), paths=tuple(meta.get("paths", ())), licence=meta["licence"],
        timing=meta["timing"], date=str(meta.get("date", "")), chapters=tuple(meta.get("chapters", ())),
        gpu_column=meta["gpu_column"], gpus=dict(meta["gpus"]), columns=("source", meta["gpu_column"]),
        sha256=str(meta.get("sha256", "")))


def _owner_repo(url: str) -> str:
    return "/".join(url.rstrip("/").removesuffix(".git").split("/")[-2:])


@functools.lru_cache(maxsize=32)
def _read_csv(path: str, mtime_ns: int, size: int) -> pd.DataFrame:
    """The CSV at ``path`` as read once per file version (callers copy before changing it)."""
    return pd.read_csv(path, low_memory=False)


def _read_checked(path: Path, entry: PublishedSource) -> pd.DataFrame:
    """The table at ``path``, checked against ``entry``, with perfkit's ``device`` column first."""
    stat = path.stat()
    frame = _read_csv(str(path), stat.st_mtime_ns, stat.st_size).copy()
    missing = [c for c in entry.columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not the {entry.name!r} table perfkit knows: it lacks the columns "
                         f"{', '.join(missing)}")
    src = frame["source"]
    blank = src.isna() | (src.astype(str).str.strip() == "")
    if blank.any():
        raise ValueError(f"{path}: {int(blank.sum())} rows have no 'source' (first at CSV line "
                         f"{int(blank.to_numpy().nonzero()[0][0]) + 2}); every published row must name where it "
                         "comes from")
    prefix, commits = _owner_repo(entry.repository) + "/", set(entry.commits)
    bad = ~src.astype(str).map(lambda s: s.startswith(prefix) and s.rpartition("@")[2] in commits)
    if bad.any():
        raise ValueError(f"{path}: {int(bad.sum())} rows come from elsewhere than {prefix}…@"
                         f"{'/'.join(c[:12] for c in entry.commits)} (first: {src[bad].iloc[0]!r})")
    labels = frame[entry.gpu_column].astype(str)
    frame.insert(0, "device", labels.map(lambda g: entry.gpus.get(g, "")))
    return frame


def _short(label: str) -> str:
    return label.split(" (")[0].strip()


def _meta(entry: PublishedSource, path: Path, frame: pd.DataFrame) -> dict[str, Any]:
    labels = list(dict.fromkeys(frame[entry.gpu_column].astype(str)))
    devices = list(dict.fromkeys(d for d in frame["device"] if d))
    return {
        "published_by": entry.publisher, "published_date": entry.date, "published_detail": "",
        "source_name": entry.name, "title": entry.title, "source_repository": entry.repository,
        "source_commit": entry.commits[0], "source_commits": list(entry.commits), "source_files": list(entry.paths),
        "licence": entry.licence, "timing": entry.timing, "caveat": entry.caveat, "path": str(path),
        "device_name": ", ".join(_short(g) for g in labels), "device": devices[0] if len(devices) == 1 else None,
        "device_kind": "gpu", "rows": len(frame), "complete": True,
    }


def _table(entry: PublishedSource, base: Path) -> tuple[pd.DataFrame, Path]:
    path = base / entry.file
    if not path.is_file():
        raise PublishedDataMissing(f"the published table {entry.name!r} ({entry.file}) is not in {base}: "
                                   f"{HOW_TO_GET}")
    return _read_checked(path, entry), path


def _wanted(gpu: Any) -> tuple[str | None, str]:
    """(perfkit's device name or None, the key of what was asked) for a ``gpu`` argument."""
    if isinstance(gpu, DeviceSpec):
        return gpu.name, _key(gpu.name)
    if not isinstance(gpu, str) or not gpu:
        raise TypeError(f"gpu must be a GPU name such as 'H100-SXM' or 'V100', a DeviceSpec, or None (every "
                        f"GPU), got {gpu!r}")
    try:
        return device_spec(gpu).name, _key(gpu)
    except LookupError:
        return None, _key(gpu)


def _key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _deepbench_kind(entry: PublishedSource) -> str | None:
    kind = entry.name.removeprefix("deepbench_")
    return kind if entry.name in CATALOG and kind in deepbench.COLUMNS else None


def published_all(source: str, *, root: str | os.PathLike | None = None) -> list[pd.DataFrame]:
    """One frame per GPU of :func:`published` (table order), each with its own metadata."""
    base = published_root(root)
    entry = _entry(source, base)
    frame, _ = _table(entry, base)
    keys = dict.fromkeys(frame["device"].where(frame["device"] != "", frame[entry.gpu_column].astype(str)))
    return [published(source, k, root=base) for k in keys]


def published(source: str, gpu: str | DeviceSpec | None = None, *,
              root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The rows of one published table (all GPUs, or one), with its provenance in ``df.attrs["meta"]``.

    ``source``: a name from :func:`published_sources` (``"xla_h100_gemm"``, ``"deepbench_gemm"``, …).
    ``gpu``: perfkit's name (``"H100-SXM"``), the publisher's label, or a ``DeviceSpec``; ``None`` for
    every GPU. Rows keep the publisher's columns plus ``device`` (perfkit's device name, ``""`` where
    perfkit has no spec for the GPU); times are seconds. DeepBench's GEMM, conv and RNN tables come
    in perfkit's columns (``M, N, K`` as run, ``dtype``, ``math_dtype``, ``time_s``), as the chapters
    read them.

    Raises ``LookupError`` for an unknown source or a GPU the table lacks (listing what exists),
    :class:`PublishedDataMissing` (a ``LookupError``) when the folder or the table is absent, and
    ``ValueError`` naming the file for a table without metadata or with a row lacking ``source``.
    """
    base = published_root(root)
    entry = _entry(source, base)
    frame, path = _table(entry, base)
    want = None if gpu is None else _wanted(gpu)
    kind = _deepbench_kind(entry)
    if kind is not None:
        try:
            per_gpu = deepbench.frames(kind, frame)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None
        if want is None:
            out = pd.concat([f.assign(device=d) for d, f in per_gpu.items()], ignore_index=True)
            out.attrs["meta"] = _meta(entry, path, frame)
            return out
        for device, part in per_gpu.items():
            meta = part.attrs["meta"]
            if want[0] == device or want[1] in {_key(device), _key(meta["device_name"])}:
                part = part.copy()
                part.attrs["meta"] = {**_meta(entry, path, frame[frame["device"] == device]), **meta}
                return part
        _no_gpu(entry, frame, gpu)
    if want is None:
        out = frame.copy()
    else:
        labels = frame[entry.gpu_column].astype(str)
        hit = (frame["device"] == want[0]) if want[0] else pd.Series(False, index=frame.index)
        hit |= labels.map(lambda g: want[1] in {_key(g), _key(_short(g)), _key(_short(g)).removeprefix("nvidia")})
        if not hit.any():
            _no_gpu(entry, frame, gpu)
        out = frame[hit].reset_index(drop=True)
    out.attrs["meta"] = _meta(entry, path, out)
    return out


def _no_gpu(entry: PublishedSource, frame: pd.DataFrame, gpu: Any) -> None:
    have = dict.fromkeys(zip(frame[entry.gpu_column].astype(str), frame["device"]))
    listed = "; ".join(f"{_short(g)} ({d})" if d else _short(g) for g, d in have)
    raise LookupError(f"the published table {entry.name!r} has no rows for GPU {gpu!r}; its GPUs: {listed}")


def has_published(source: str, root: str | os.PathLike | None = None) -> bool:
    """Whether :func:`published` would find ``source`` (a catalogue name) in the published-data folder."""
    try:
        base = published_root(root)
    except PublishedDataMissing:
        return False
    return (base / _entry(source, base).file).is_file()


def published_or_none(source: str, gpu: str | DeviceSpec | None = None, *,
                      root: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """:func:`published`, or None where the published-data folder (or the table) is absent: for
    chapters and analyses that then show the model's prediction and say how to get the data."""
    return published(source, gpu, root=root) if has_published(source, root) else None


def published_sources(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """What perfkit can read: one row per published table, whether it is here, and how it was timed.

    Columns: ``source`` (the name :func:`published` takes), ``title``, ``publisher``, ``gpus``
    (the publisher's labels), ``devices`` (perfkit's names), ``rows`` (``None`` when absent),
    ``available``, ``date``, ``commit`` (12 hex digits), ``licence``, ``timing``, ``chapters``,
    ``path``. A missing folder gives every table with ``available=False``.
    """
    try:
        base: Path | None = published_root(root)
    except PublishedDataMissing:
        base = None
    entries: dict[str, PublishedSource] = dict(CATALOG)
    if base is not None:
        for csv in sorted([*base.glob("*.csv"), *base.glob("modern/*.csv")]):
            if csv.stem not in entries and not any(e.file == str(csv.relative_to(base)) for e in CATALOG.values()):
                try:
                    entries[csv.stem] = _sidecar(csv)
                except ValueError:
                    continue  # published() names the file and what it lacks
    rows = []
    for e in entries.values():
        path = None if base is None else base / e.file
        here = path is not None and path.is_file()
        rows.append({"source": e.name, "title": e.title, "publisher": e.publisher,
                     "gpus": ", ".join(_short(g) for g in e.gpus), "devices": ", ".join(e.devices),
                     "rows": _count_rows(path) if here else None, "available": here, "date": e.date,
                     "commit": e.commit, "licence": e.licence, "timing": e.timing,
                     "chapters": ", ".join(e.chapters), "path": str(path) if path else None})
    return pd.DataFrame(rows, columns=list(SOURCE_COLUMNS))


def _count_rows(path: Path) -> int:
    with open(path, "rb") as f:
        return max(0, sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) - 1)


def describe(frame: pd.DataFrame) -> Mapping[str, Any]:
    """The provenance of a published frame (``frame.attrs["meta"]``), or ``{}`` for any other frame."""
    meta = frame.attrs.get("meta", {}) if isinstance(frame, pd.DataFrame) else {}
    return meta if meta.get("published_by") else {}
