"""Record experiments on this machine into ``<out>/<device-slug>/<experiment>.csv`` + ``.json``.

What a recording run does, per experiment:

1. The JSON metadata is written first, with ``complete: false``. The CSV's header is the
   experiment's declared columns; every row is appended (and flushed) as soon as the experiment
   measures it, through its ``on_row`` callback. The CSV is never rewritten: the rows streamed are
   the recording, and they must be the rows the experiment returns.
2. When the experiment returns, the JSON gets ``complete: true``, ``finished_at`` and ``rows``.
3. If the experiment raises, the rows measured so far stay on disk, and the JSON keeps
   ``complete: false`` and notes the ``error``. Other experiments still run; :func:`record` then
   raises :class:`RecordingFailed`. A ``KeyboardInterrupt`` is saved the same way, then re-raised.

Reruns (the same device, the same ``out``). "This run" below means: the same device, params,
perfkit commit, declared columns (in order: the CSV's header) and UTC day as the existing recording's
JSON says (:func:`_same_run`, one test for skipping and resuming):

- No recording yet: rows go straight into ``<experiment>.csv``.
- Skip (``resume=True``, the default): an existing *complete* recording of this run, whose CSV holds
  the rows its JSON counts and whose perfkit commit is known (not ``null``), is kept byte for byte
  and the experiment is not run; a line says so. Its files count as this run's recording (in the
  paths returned, and in an archive of ``out``). So a run cut short at its time budget, run again
  the same day at the same commit, measures only what it had not finished.
- Resume (``resume=True``): an existing *incomplete* recording of this run, of an experiment whose
  function has a ``skip`` parameter, is continued: the experiment gets ``skip=<DataFrame of the rows
  already recorded>`` and measures only the rest; new rows are appended to the same CSV and
  ``resumed_at`` lists when.
- Otherwise (``resume=False``, or a recording from another commit, day, device, params or
  declaration, or an incomplete one that cannot be resumed) the experiment is measured again from
  the start. As an existing recording (complete or not) is there, the new run streams into the
  hidden files ``.<experiment>.partial.csv``/``.json`` beside it and, only when it completes,
  atomically replaces the old files. An existing recording is only ever replaced by a complete one;
  a file never mixes two runs of different devices or dates.

A commit ending in ``-dirty`` names uncommitted changes, which this test cannot tell apart: after
editing an experiment, rerun with ``resume=False`` (``--no-resume``).

Data in the repository's ``data/`` must be real GPU measurements: recording on a CPU into it is
refused.
"""

from __future__ import annotations

import csv
import datetime as _dt
import inspect
import json
import os
import sys
import tarfile
import time
import traceback
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from .._validate import boolean, folder
from ..data import device_slug, read_meta, repo_data_dir
from ..devices import DeviceSpec, cuda_available, current_device
from ..environment import environment
from .registry import REGISTRY, Experiment, get, missing_needs

_NEED_TEXT = {"cuda": "a CUDA GPU (torch.cuda.is_available() is False)", "gpus2": "two or more CUDA GPUs",
              "cupy": "cupy (not importable; on an AMD GPU perfkit's CuPy kernels do not run: NVIDIA-only)",
              "triton": "triton (not importable)"}


class RecordingFailed(RuntimeError):
    """Raised by :func:`record` after all experiments ran, when at least one of them failed.

    ``failed`` maps experiment name → error text; ``paths`` lists the complete recordings
    (measured by this run, or skipped as already recorded: see :func:`record`).
    """

    def __init__(self, failed: Mapping[str, str], paths: list[Path]):
        self.failed = dict(failed)
        self.paths = list(paths)
        lines = "; ".join(f"{k}: {v}" for k, v in self.failed.items())
        super().__init__(f"{len(self.failed)} experiment(s) failed (their rows so far are kept): {lines}")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a hidden temporary file and ``os.replace``: never half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _write_meta(path: Path, meta: Mapping[str, Any]) -> None:
    _atomic_write(path, json.dumps(meta, indent=2, default=str) + "\n")


def _plain(value: Any) -> Any:
    """A CSV-friendly scalar: numpy/torch scalars → Python numbers, other objects → ``str``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    item = getattr(value, "item", None)  # numpy scalars, 0-d arrays and tensors
    if callable(item):
        try:
            return _plain(item())
        except (TypeError, ValueError, RuntimeError):
            pass
    return str(value)


def _csv_rows(path: Path) -> int:
    """The number of data rows (lines after the header) of the CSV file ``path``."""
    with open(path, newline="", encoding="utf-8") as f:
        return max(sum(1 for _ in csv.reader(f)) - 1, 0)


class _RowAppender:
    """``on_row`` for a recording: appends each row to a CSV whose header is the declared columns."""

    def __init__(self, path: Path, columns: list[str], append: bool):
        self.columns = columns
        self.rows = _csv_rows(path) if append else 0
        self._f = open(path, "a" if append else "w", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._f, columns, restval="")
        if not append:
            self._writer.writeheader()
            self._f.flush()

    def __call__(self, row: Mapping[str, Any]) -> None:
        if not isinstance(row, Mapping):
            raise TypeError(f"on_row must be called with a dict (column → value), got {type(row).__name__}")
        undeclared = [k for k in row if k not in self.columns]
        if undeclared:
            raise ValueError(f"row has columns the experiment does not declare: {undeclared}; "
                             f"declared: {self.columns}")
        self._writer.writerow({k: _plain(v) for k, v in row.items()})
        self._f.flush()
        self.rows += 1

    def close(self) -> None:
        self._f.close()


def _resolve(names: str | Iterable[str] | None) -> list[Experiment]:
    if names is None:
        return list(REGISTRY.values())
    if isinstance(names, str):
        names = [names]
    try:
        names = list(names)
    except TypeError:
        raise TypeError(f"experiments must be an experiment name, a list of names or None, got {names!r}") from None
    chosen: list[Experiment] = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"experiments must hold experiment name strings, got {name!r}")
        exp = get(name)  # LookupError naming the registered experiments
        if exp not in chosen:
            chosen.append(exp)
    return chosen


def _check_out(out: Path, device: DeviceSpec) -> None:
    if device.kind == "gpu":
        return
    data, target = repo_data_dir().resolve(), out.resolve()
    if target == data or data in target.parents:
        raise ValueError(f"out={str(out)!r} is the repository's data/ folder, which holds only real GPU "
                         f"measurements, but this machine has no CUDA GPU ({device.name}); pass another "
                         "out folder (e.g. out='cpu_data' or `--out cpu_data`)")


def _old_meta(json_path: Path) -> dict[str, Any] | None:
    try:
        return read_meta(json_path) if json_path.is_file() else None
    except (OSError, ValueError):
        return None


def _same_run(old: Mapping[str, Any], meta: Mapping[str, Any]) -> bool:
    """Whether the existing recording's metadata ``old`` has the device, experiment, params, perfkit
    commit, declared columns (in order: the CSV's header) and UTC day of the new run's ``meta``."""
    same = all(old.get(k) == meta[k] for k in ("device_name", "experiment", "params", "perfkit_commit"))
    same_header = list(old.get("columns") or {}) == list(meta["columns"])
    return same and same_header and str(old.get("recorded_at", ""))[:10] == meta["recorded_at"][:10]


def _can_resume(exp: Experiment, old: Mapping[str, Any] | None, meta: Mapping[str, Any], csv_path: Path) -> bool:
    if old is None or old.get("complete", False) or not csv_path.is_file() or csv_path.stat().st_size == 0:
        return False
    if "skip" not in inspect.signature(exp.func).parameters:
        return False
    return _same_run(old, meta)


def _done_today(old: Mapping[str, Any] | None, meta: Mapping[str, Any], csv_path: Path) -> bool:
    """Whether ``old`` is a complete recording of this run (:func:`_same_run`, at a known commit) whose
    CSV holds the rows its JSON counts: then the experiment is skipped."""
    if old is None or old.get("complete") is not True or meta["perfkit_commit"] is None or not csv_path.is_file():
        return False
    try:
        return _same_run(old, meta) and _csv_rows(csv_path) == old.get("rows")
    except (OSError, ValueError, csv.Error):  # an unreadable CSV is measured again
        return False


def _new_meta(exp: Experiment, device: DeviceSpec, env: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """The metadata a recording of ``exp`` starts with (``complete: false``, ``recorded_at`` now)."""
    return {
        "experiment": exp.name, "description": exp.description, "device_name": device.driver_name or device.name,
        "device_kind": device.kind, "device": device.name, "sm_count": device.sms,
        **{k: env[k] for k in ("driver", "cuda", "torch", "cupy", "triton", "perfkit", "perfkit_commit")},
        "recorded_at": _now(), "finished_at": None, "complete": False, "error": None,
        "params": {"quick": quick}, "columns": dict(exp.columns), "needs": list(exp.needs), "rows": 0,
    }


def _record_one(exp: Experiment, csv_path: Path, meta: dict[str, Any], old: Mapping[str, Any] | None, *,
                quick: bool, progress: bool, resume: bool) -> tuple[Path, int]:
    """Record one experiment into ``csv_path`` (and its ``.json``), starting from ``meta``, over the
    existing recording ``old`` (its metadata, or None); returns the CSV path and its row count.
    Re-raises what the experiment raised."""
    where, json_path = csv_path.parent, csv_path.with_suffix(".json")
    where.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {"quick": quick, "progress": progress}
    done = 0
    if resume and _can_resume(exp, old, meta, csv_path):
        mode, write_csv, write_json = "resume", csv_path, json_path
        kwargs["skip"] = pd.read_csv(csv_path)
        done = len(kwargs["skip"])
        meta.update(recorded_at=old["recorded_at"], resumed_at=[*(old.get("resumed_at") or []), meta["recorded_at"]])
        print(f"  resuming {csv_path} ({done} rows already recorded)", flush=True)
    elif old is not None or csv_path.exists():
        mode, write_csv, write_json = "replace", where / f".{exp.name}.partial.csv", where / f".{exp.name}.partial.json"
    else:
        mode, write_csv, write_json = "new", csv_path, json_path

    rows = _RowAppender(write_csv, list(exp.columns), append=mode == "resume")
    _write_meta(write_json, meta)
    try:
        result = exp(on_row=rows, **kwargs)
        if len(result) != rows.rows - done:
            raise RuntimeError(f"{exp.name} returned {len(result)} rows but handed {rows.rows - done} to on_row; "
                               "every measured row must go through on_row")
    except BaseException as e:
        rows.close()
        meta["rows"] = rows.rows
        meta["error"] = "KeyboardInterrupt" if isinstance(e, KeyboardInterrupt) else \
            "".join(traceback.format_exception_only(type(e), e)).strip()
        _write_meta(write_json, meta)
        if mode == "replace":
            print(f"  the existing recording {csv_path} is kept; the {rows.rows} rows of this "
                  f"interrupted run are in {write_csv}", flush=True)
        raise
    rows.close()
    meta.update(rows=rows.rows, complete=True, finished_at=_now())
    _write_meta(write_json, meta)
    if mode == "replace":  # the CSV first: readers only trust a CSV with its JSON
        os.replace(write_csv, csv_path)
        os.replace(write_json, json_path)
    return csv_path, rows.rows


def record(experiments: str | Iterable[str] | None = None, out: str | os.PathLike = "data", *,
           quick: bool = False, progress: bool = True, resume: bool = True) -> list[Path]:
    """Run experiments on this machine and write ``out/<device-slug>/<name>.csv`` + ``.json`` each.

    ``experiments``: names (or one name); ``None`` runs every registered experiment. Experiments
    whose ``needs`` this machine lacks are skipped with a printed reason. ``quick`` runs the small
    sweeps; ``progress`` shows progress bars; ``resume``: skip what is already recorded today at this
    commit and continue what is incomplete (see the module docstring). Returns the CSV paths of the
    complete recordings of the chosen experiments, in order: those measured now and those skipped
    because already recorded (their existing files are their recording).

    Raises ``ValueError`` when this machine has no GPU and ``out`` is the repository's ``data/``,
    ``LookupError`` for an unknown name, :class:`RecordingFailed` (after the others ran) when an
    experiment raised, and re-raises ``KeyboardInterrupt`` after saving what was measured.
    """
    out = folder("out", out)
    quick, progress, resume = boolean("quick", quick), boolean("progress", progress), boolean("resume", resume)
    chosen = _resolve(experiments)
    device = current_device()
    _check_out(out, device)
    env = environment()
    print(f"perfkit: recording {len(chosen)} experiment(s) on {device.label} into {out}"
          f"{' (quick)' if quick else ''}", flush=True)
    where = out / device_slug(device.driver_name or device.name)
    written: list[Path] = []
    failed: dict[str, str] = {}
    skipped = 0
    t_all = time.perf_counter()
    for i, exp in enumerate(chosen, 1):
        step = f"[{i}/{len(chosen)}] {exp.name}"
        lacking = [_NEED_TEXT.get(n, n) for n in missing_needs(exp)]
        if lacking:
            print(f"{step}: skipped, this machine lacks {', '.join(lacking)}", flush=True)
            continue
        csv_path, meta = where / f"{exp.name}.csv", _new_meta(exp, device, env, quick)
        old = _old_meta(csv_path.with_suffix(".json"))
        if resume and _done_today(old, meta, csv_path):
            print(f"{step}: already recorded today at this commit (complete, {old['rows']} rows): skipped; "
                  "--no-resume measures it again", flush=True)
            written.append(csv_path)
            skipped += 1
            continue
        print(f"{step}: {exp.description}", flush=True)
        t0 = time.perf_counter()
        try:
            path, rows = _record_one(exp, csv_path, meta, old, quick=quick, progress=progress, resume=resume)
        except KeyboardInterrupt:
            print(f"{step}: interrupted after {time.perf_counter() - t0:.1f} s; "
                  "rows measured so far are kept (complete=false)", flush=True)
            raise
        except Exception as e:  # noqa: BLE001  (noted in the JSON; the other experiments still run)
            failed[exp.name] = f"{type(e).__name__}: {e}"
            print(f"{step}: FAILED after {time.perf_counter() - t0:.1f} s: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            continue
        finally:
            if "torch" in sys.modules and cuda_available():
                sys.modules["torch"].cuda.empty_cache()
        written.append(path)
        print(f"{step}: {rows} rows in {time.perf_counter() - t0:.1f} s → {path}", flush=True)
    also = f"; {skipped} already recorded today (skipped)" if skipped else ""
    print(f"perfkit: recorded {len(written) - skipped} of {len(chosen)} experiment(s) in "
          f"{time.perf_counter() - t_all:.1f} s{also}", flush=True)
    if failed:
        raise RecordingFailed(failed, written)
    return written


def archive(out_dir: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Pack the recording folder ``out_dir`` into the single ``.tar.gz`` file ``path`` (returned).

    The archive holds ``<out_dir name>/<device-slug>/<experiment>.csv|.json``; hidden files
    (reruns in progress, interrupted reruns) are left out.
    """
    src, dst = folder("out_dir", out_dir), folder("path", path)
    if not src.is_dir():
        raise FileNotFoundError(f"out_dir {str(src)!r} is not a folder (nothing recorded there?)")
    if not dst.name.endswith((".tar.gz", ".tgz")):
        raise ValueError(f"path must end with .tar.gz or .tgz, got {str(dst)!r}")
    dst.parent.mkdir(parents=True, exist_ok=True)

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if any(part.startswith(".") for part in Path(info.name).parts) else info

    tmp = dst.with_name(f".{dst.name}.tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(src, arcname=src.resolve().name, filter=keep)
    os.replace(tmp, dst)
    return dst


__all__ = ["RecordingFailed", "archive", "record"]
