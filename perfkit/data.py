"""Recorded measurements: where they live and how to read them.

Layout (one folder per device, one CSV + one JSON per experiment)::

    data/<device-slug>/<experiment>.csv    the rows, exactly the columns the experiment returns
    data/<device-slug>/<experiment>.json   metadata: device, versions, dates, column meanings, params

``<device-slug>`` is the driver's device name, lower-cased, with every run of characters other
than ``a-z0-9`` replaced by one dash (``"NVIDIA H100 80GB HBM3"`` → ``"nvidia-h100-80gb-hbm3"``);
see :func:`device_slug`. Files whose name starts with a dot (a rerun in progress or an interrupted
rerun, see :mod:`perfkit.experiments.record`) are never read.

The data root is, in order: the ``root`` argument, the ``PERFKIT_DATA`` environment variable, the
``data/`` folder beside the ``perfkit`` package (the repository's ``data/``). A CSV without its JSON
is refused: data without metadata is not trusted. A loaded frame carries its metadata in
``frame.attrs["meta"]``; :func:`perfkit.source_of` turns it into the figure label.

Measurements published by a third party are not here: perfkit reads them from a folder outside
the repository (:mod:`perfkit.published_data`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ._validate import folder
from .devices import KNOWN_DEVICES, match_driver_name
from .meta import FrameMeta

#: Columns of :func:`recordings`.
RECORDING_COLUMNS: tuple[str, ...] = (
    "device_slug", "device_name", "device_kind", "experiment", "recorded_at", "rows", "complete", "path",
)
def device_slug(name: str) -> str:
    """The folder name for a device: lower-case letters, digits and single dashes.

    ``"NVIDIA H100 80GB HBM3"`` → ``"nvidia-h100-80gb-hbm3"``; ``"CPU (x86_64, 16 cores)"`` →
    ``"cpu-x86-64-16-cores"``.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a device name string such as 'NVIDIA H100 80GB HBM3', got {name!r}")
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise ValueError(f"name must contain at least one letter or digit, got {name!r}")
    return slug


def repo_data_dir() -> Path:
    """The repository's ``data/`` folder: ``<folder holding the perfkit package>/data`` in a
    checkout, else the copy an installed wheel carries (``perfkit/_data``)."""
    here = Path(__file__).resolve().parent
    checkout = here.parent / "data"
    return checkout if checkout.is_dir() and (here.parent / "pyproject.toml").is_file() else here / "_data"


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The folder recordings are read from: ``root``, else ``$PERFKIT_DATA``, else :func:`repo_data_dir`."""
    if root is not None:
        return folder("root", root)
    env = os.environ.get("PERFKIT_DATA")
    if env:
        return Path(env)
    return repo_data_dir()


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """A recording's metadata JSON as a dict; ``ValueError`` if it is not a JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"metadata file {path} is not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"metadata file {path} must hold a JSON object, got {type(meta).__name__}")
    return meta


def recordings(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every recording under the data root, one row each, sorted by experiment then date.

    Columns: ``device_slug``, ``device_name`` (as the driver reported it), ``device_kind``
    (``"gpu"``/``"cpu"``), ``experiment``, ``recorded_at`` (ISO 8601 UTC string), ``rows``,
    ``complete`` (bool), ``path`` (of the CSV). A missing root gives an empty table.
    """
    base = data_root(root)
    found = []
    if base.is_dir():
        for meta_path in sorted(base.glob("*/*.json")):
            if meta_path.name.startswith(".") or meta_path.parent.name.startswith("."):
                continue
            csv_path = meta_path.with_suffix(".csv")
            if not csv_path.is_file():
                continue
            try:
                meta = FrameMeta.of(read_meta(meta_path), "metadata")
            except (OSError, ValueError):
                continue  # not a recording's metadata
            found.append({
                "device_slug": meta_path.parent.name,
                "device_name": meta.device_name,
                "device_kind": meta.device_kind,
                "experiment": meta.experiment or meta_path.stem,
                "recorded_at": meta.recorded_at,
                "rows": meta.rows,
                "complete": bool(meta.complete),
                "path": str(csv_path),
            })
    table = pd.DataFrame(found, columns=list(RECORDING_COLUMNS))
    if len(table):
        table = table.sort_values(["experiment", "recorded_at", "device_slug"], na_position="first")
        table = table.reset_index(drop=True)
    return table


def _matches_device(device: str, slug: str, device_name: Any) -> bool:
    """Does ``device`` (a slug, a driver name or a perfkit table name) name this recording's device?"""
    try:
        wanted = device_slug(device)
    except ValueError:
        return False
    if wanted == slug:
        return True
    entry = {device_slug(k): k for k in KNOWN_DEVICES}.get(wanted)  # a table name such as "H100-SXM"
    return entry is not None and isinstance(device_name, str) and match_driver_name(device_name) == entry


def _find(experiment: str, device: Any, root) -> pd.Series:
    if not isinstance(experiment, str) or not experiment:
        raise TypeError(f"experiment must be an experiment name string such as 'gemm', got {experiment!r}")
    if device is not None and not isinstance(device, str):
        name = getattr(device, "driver_name", None) or getattr(device, "name", None)  # a DeviceSpec
        if not isinstance(name, str):
            raise TypeError(f"device must be a device slug, a device name, a DeviceSpec or None, got {device!r}")
        device = name
    base = data_root(root)
    table = recordings(base)
    mine = table[table["experiment"] == experiment]
    if device is None:
        chosen = mine[mine["device_kind"] == "gpu"]
        wanted = "GPU recording"
    else:
        keep = [_matches_device(device, s, n) for s, n in zip(mine["device_slug"], mine["device_name"])]
        chosen = mine[keep] if len(mine) else mine
        wanted = f"recording on device {device!r}"
    if not len(chosen):
        if len(table):
            have = "; ".join(
                f"{r.experiment} on {r.device_slug} ({r.device_kind}{'' if r.complete else ', incomplete'})"
                for r in table.itertuples()
            )
        else:
            have = "none"
        raise LookupError(f"no {wanted} of experiment {experiment!r} under {base}; recordings there: {have}")
    # Prefer complete recordings, then the most recent.
    chosen = chosen.sort_values(["complete", "recorded_at"], na_position="first")
    return chosen.iloc[-1]


def load(experiment: str, device: Any = None, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The recorded rows of ``experiment``, with its metadata in ``df.attrs["meta"]`` (a dict).

    ``device``: a device slug (``"nvidia-h100-80gb-hbm3"``), the driver's device name, a perfkit
    table name (``"H100-SXM"``) or a :class:`~perfkit.devices.DeviceSpec`; ``None`` picks the GPU
    recording of that experiment (a complete one before an incomplete one, then the most recent).
    ``root``: the data folder (default: ``$PERFKIT_DATA``, else the repository's ``data/``).

    Raises ``LookupError`` (listing what exists) when there is no matching recording, and
    ``FileNotFoundError`` when the CSV has no metadata JSON beside it.
    """
    try:
        row = _find(experiment, device, root)
    except LookupError:
        # A CSV without metadata is an error, not "no recording": say so.
        base = data_root(root)
        orphans = [p for p in base.glob(f"*/{experiment}.csv") if not p.with_suffix(".json").is_file()]
        if device is not None and isinstance(device, str):
            orphans = [p for p in orphans if _matches_device(device, p.parent.name, None)]
        if orphans:
            raise FileNotFoundError(
                f"{orphans[0]} has no metadata file {orphans[0].with_suffix('.json').name} beside it; "
                "data without metadata is not trusted (record it with `python -m perfkit record`)"
            ) from None
        raise
    csv_path = Path(row["path"])
    meta = read_meta(csv_path.with_suffix(".json"))
    try:
        df = pd.read_csv(csv_path)
    except pd.errors.EmptyDataError:  # interrupted before the first row
        df = pd.DataFrame(columns=list(FrameMeta.of(meta, "metadata").columns))
    df.attrs["meta"] = meta
    return df


def has_recording(experiment: str, device: Any = None, root: str | os.PathLike | None = None) -> bool:
    """Whether :func:`load` would find a recording of ``experiment`` (same arguments)."""
    try:
        _find(experiment, device, root)
    except LookupError:
        return False
    return True
