"""Record experiments on this machine into ``<out>/<device-slug>/<experiment>.csv`` + ``.json``.

What a recording run does, per experiment:

1. The JSON metadata is written first, with ``complete: false``; every row is appended to the CSV
   (and flushed) as soon as the experiment measures it (through its ``on_row`` callback).
2. When the experiment returns, the CSV is rewritten from the DataFrame it returned (so a
   recording holds exactly what a live run returns; the streamed rows are the safety net) and the
   JSON gets ``complete: true``, ``finished_at`` and ``rows``.
3. If the experiment raises, the rows measured so far stay on disk, and the JSON keeps
   ``complete: false`` and notes the ``error``. Other experiments still run; :func:`record` then
   raises :class:`RecordingFailed`. A ``KeyboardInterrupt`` is saved the same way, then re-raised.

Reruns (the same device, the same ``out``):

- No recording yet: rows go straight into ``<experiment>.csv``.
- A recording exists (complete or not): the new run streams into the hidden files
  ``.<experiment>.partial.csv``/``.json`` beside it and, only when it completes, atomically
  replaces the old files (``os.replace``). An existing recording is therefore only ever replaced
  by a complete one: an interrupted rerun leaves the old recording untouched, and its own rows in
  the hidden ``.partial`` files. A file never mixes two runs of different devices or dates.
- Resume (``resume=True``, the default): if the existing recording is *incomplete*, from the same
  device, the same ``params``, the same perfkit commit and the same UTC day, **and** the
  experiment function has a ``skip`` parameter, the run continues it: the experiment gets
  ``skip=<DataFrame of the rows already recorded>`` and must measure only the rest (returning just
  the new rows); new rows are appended to the same CSV and ``resumed_at`` lists when. Otherwise the
  experiment is measured again from the start as above. ``resume=False`` never continues.

Data in the repository's ``data/`` must be real GPU measurements: recording on a CPU into it is
refused.
"""

from __future__ import annotations

import csv
import datetime as _dt
import importlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from .data import device_slug, repo_data_dir
from .devices import cuda_available

class RecordingFailed(RuntimeError):
    """Raised by :func:`record` after all experiments ran, when at least one of them failed.

    ``failed`` maps experiment name → error text; ``paths`` lists the files written (complete
    recordings and the CSVs of failed ones).
    """

    def __init__(self, failed: Mapping[str, str], paths: list[Path]):
        self.failed = dict(failed)
        self.paths = list(paths)
        lines = "; ".join(f"{k}: {v}" for k, v in self.failed.items())
        super().__init__(f"{len(self.failed)} experiment(s) failed (their rows so far are kept): {lines}")


# ---------------------------------------------------------------------------------------------
# Environment: versions, driver, commit


def _module_version(module: str) -> str | None:
    """``module.__version__`` if the module imports, else ``None``."""
    try:
        if importlib.util.find_spec(module) is None:
            return None
        mod = importlib.import_module(module)
    except Exception:  # noqa: BLE001  (a broken install is "not importable")
        return None
    version = getattr(mod, "__version__", None)
    return None if version is None else str(version)


def nvidia_driver_version() -> str | None:
    """The NVIDIA driver version (e.g. ``'580.95.05'``), or ``None`` without an NVIDIA driver.

    Tried in order: ``pynvml`` (if importable), ``nvidia-smi --query-gpu=driver_version``.
    (torch reports the CUDA runtime version, not the driver's.)
    """
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001  (not installed, no driver, no GPU)
        pass
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[0] if lines else None


def perfkit_commit() -> str | None:
    """``git rev-parse HEAD`` of the checkout perfkit is imported from, plus ``-dirty`` when the
    ``perfkit/`` package there has uncommitted changes; ``None`` when it is not a git checkout.

    A copy of the tree without ``.git`` (e.g. on a remote GPU machine) can be told its commit with
    the ``PERFKIT_COMMIT`` environment variable, which then wins.
    """
    if os.environ.get("PERFKIT_COMMIT"):
        return os.environ["PERFKIT_COMMIT"].strip()
    repo = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != repo:
        return None  # perfkit is installed somewhere that is not its own checkout
    head = git("rev-parse", "HEAD")
    if not head:
        return None  # no commit yet
    status = git("status", "--porcelain", "--", "perfkit")
    return head + ("-dirty" if status else "")


def environment() -> dict[str, Any]:
    """Versions that a recording depends on: ``driver`` (NVIDIA), ``cuda`` (torch's CUDA runtime),
    ``torch``, ``cupy``, ``triton``, ``perfkit``, ``perfkit_commit`` and ``cuda_available``.
    A value that does not apply or cannot be found is ``None``."""
    from . import __version__

    torch_version = _module_version("torch")
    cuda = None
    if torch_version is not None:
        import torch

        cuda = torch.version.cuda
    has_cuda = cuda_available()
    return {
        "driver": nvidia_driver_version() if has_cuda or shutil.which("nvidia-smi") else None,
        "cuda": cuda,
        "torch": torch_version,
        "cupy": _module_version("cupy"),
        "triton": _module_version("triton"),
        "perfkit": __version__,
        "perfkit_commit": perfkit_commit(),
        "cuda_available": has_cuda,
    }


_NEED_TEXT = {
    "cuda": "a CUDA GPU (torch.cuda.is_available() is False)",
    "cupy": "cupy (not importable)",
    "triton": "triton (not importable)",
}


def _unmet(exp) -> list[str]:
    """What ``exp.needs`` asks for that this machine lacks, in words."""
    from .experiments import missing_needs

    return [_NEED_TEXT.get(n, n) for n in missing_needs(exp)]


# ---------------------------------------------------------------------------------------------
# Registry (every experiment module is imported with perfkit itself)


def _resolve(names: str | Iterable[str] | None) -> list:
    from . import experiments

    if names is None:
        return list(experiments.REGISTRY.values())
    if isinstance(names, str):
        names = [names]
    try:
        names = list(names)
    except TypeError:
        raise TypeError(f"experiments must be an experiment name, a list of names or None, got {names!r}") from None
    chosen = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"experiments must hold experiment name strings, got {name!r}")
        exp = experiments.get(name)  # LookupError naming the registered experiments
        if exp not in chosen:
            chosen.append(exp)
    return chosen


# ---------------------------------------------------------------------------------------------
# Files


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


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


def _write_json(path: Path, meta: Mapping[str, Any]) -> None:
    """Write ``meta`` to ``path`` atomically (a temporary file, then ``os.replace``)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, default=str)
        f.write("\n")
    os.replace(tmp, path)


def _write_frame(path: Path, df: pd.DataFrame) -> None:
    """Write ``df`` as CSV to ``path`` atomically."""
    tmp = path.with_name(f".{path.name}.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


class _RowWriter:
    """Appends row dicts to a CSV, flushing after each; widens the header if a row brings new keys."""

    def __init__(self, path: Path, append: bool = False):
        self.path = path
        self.fields: list[str] = []
        self.rows = 0
        if append and path.is_file() and path.stat().st_size:
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.reader(f)
                self.fields = next(reader, [])
                self.rows = sum(1 for _ in reader)
            self._f = open(path, "a", newline="", encoding="utf-8")
        else:
            self._f = open(path, "w", newline="", encoding="utf-8")

    def __call__(self, row: Mapping[str, Any]) -> None:
        if not isinstance(row, Mapping):
            raise TypeError(f"on_row must be called with a dict (column → value), got {type(row).__name__}")
        row = {str(k): _plain(v) for k, v in row.items()}
        new = [k for k in row if k not in self.fields]
        if new and self.fields:
            self._widen(self.fields + new)
        elif new:
            self.fields = list(row)
            csv.writer(self._f).writerow(self.fields)
        csv.DictWriter(self._f, self.fields, restval="").writerow(row)
        self._f.flush()
        self.rows += 1

    def _widen(self, fields: list[str]) -> None:
        self._f.close()
        with open(self.path, newline="", encoding="utf-8") as f:
            old = list(csv.DictReader(f))
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fields, restval="")
            w.writeheader()
            w.writerows(old)
        os.replace(tmp, self.path)
        self.fields = fields
        self._f = open(self.path, "a", newline="", encoding="utf-8")

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()


def _read_existing(csv_path: Path, json_path: Path) -> dict[str, Any] | None:
    if not json_path.is_file():
        return None
    try:
        with open(json_path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _check_out(out: Path, device) -> None:
    if device.kind != "gpu":
        data = repo_data_dir().resolve()
        target = out.resolve()
        if target == data or data in target.parents:
            raise ValueError(
                f"out={str(out)!r} is the repository's data/ folder, which holds only real GPU "
                f"measurements, but this machine has no CUDA GPU ({device.name}); pass another "
                "out folder (e.g. out='cpu_data' or `--out cpu_data`)"
            )


def _params_of(quick: bool) -> dict[str, Any]:
    return {"quick": quick}


def _can_resume(exp, old: dict[str, Any] | None, base_meta: Mapping[str, Any], csv_path: Path) -> bool:
    if old is None or old.get("complete", False) or not csv_path.is_file() or csv_path.stat().st_size == 0:
        return False
    if "skip" not in inspect.signature(exp.func).parameters:
        return False
    same = all(old.get(k) == base_meta[k] for k in ("device_name", "experiment", "params", "perfkit_commit"))
    same_day = str(old.get("recorded_at", ""))[:10] == base_meta["recorded_at"][:10]
    return same and same_day


# ---------------------------------------------------------------------------------------------
# Recording


def _record_one(exp, out: Path, device, env: Mapping[str, Any], *, quick: bool, progress: bool,
                resume: bool) -> Path:
    """Record one experiment; returns the CSV path. Raises what the experiment raised (after saving)."""
    device_name = device.driver_name or device.name
    folder = out / device_slug(device_name)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = folder / f"{exp.name}.csv", folder / f"{exp.name}.json"
    meta: dict[str, Any] = {
        "experiment": exp.name,
        "description": exp.description,
        "device_name": device_name,
        "device_kind": device.kind,
        "device": device.name,  # perfkit's table name (or the driver name for an unknown GPU)
        "sm_count": device.sms,
        **{k: env[k] for k in ("driver", "cuda", "torch", "cupy", "triton", "perfkit", "perfkit_commit")},
        "recorded_at": _now(),
        "finished_at": None,
        "complete": False,
        "error": None,
        "params": _params_of(quick),
        "columns": dict(exp.columns),
        "needs": list(exp.needs),
        "rows": 0,
    }
    old = _read_existing(csv_path, json_path)
    kwargs: dict[str, Any] = {"quick": quick, "progress": progress}
    old_rows = None
    if resume and _can_resume(exp, old, meta, csv_path):
        mode = "resume"
        old_rows = pd.read_csv(csv_path)
        kwargs["skip"] = old_rows
        meta.update(recorded_at=old["recorded_at"], resumed_at=list(old.get("resumed_at") or []) + [meta["recorded_at"]])
        write_csv, write_json = csv_path, json_path
        print(f"  resuming {csv_path} ({len(old_rows)} rows already recorded)", flush=True)
    elif old is not None or csv_path.exists():
        mode = "replace"
        write_csv = folder / f".{exp.name}.partial.csv"
        write_json = folder / f".{exp.name}.partial.json"
    else:
        mode = "new"
        write_csv, write_json = csv_path, json_path

    writer = _RowWriter(write_csv, append=(mode == "resume"))
    _write_json(write_json, meta)
    try:
        result = exp.func(on_row=writer, **kwargs)
    except BaseException as e:
        writer.close()
        meta["rows"] = writer.rows
        meta["error"] = "KeyboardInterrupt" if isinstance(e, KeyboardInterrupt) else \
            "".join(traceback.format_exception_only(type(e), e)).strip()
        _write_json(write_json, meta)
        if mode == "replace":
            print(f"  the existing recording {csv_path} is kept; the {writer.rows} rows of this "
                  f"interrupted run are in {write_csv}", flush=True)
        raise
    writer.close()

    # Final rows: what the experiment returned (plus, when resuming, what was recorded before).
    if isinstance(result, pd.DataFrame):
        final = result
        streamed = writer.rows - (len(old_rows) if old_rows is not None else 0)
        if streamed != len(result):
            print(f"  note: {exp.name} streamed {streamed} rows through on_row but returned {len(result)}; "
                  "the returned rows are recorded", flush=True)
    else:
        print(f"  note: {exp.name} returned {type(result).__name__}, not a DataFrame; "
              "the rows it streamed through on_row are recorded", flush=True)
        final = pd.read_csv(write_csv) if writer.rows else pd.DataFrame(columns=list(exp.columns))
        if old_rows is not None:
            final = final.iloc[len(old_rows):]
    if old_rows is not None:
        final = pd.concat([old_rows, final], ignore_index=True)
    objects = [c for c in final.columns if final[c].dtype == object]
    if objects:  # numpy/torch scalars in object columns → plain numbers
        final = final.copy()
        for c in objects:
            final[c] = final[c].map(_plain)
    _write_frame(write_csv, final)
    meta.update(rows=len(final), complete=True, finished_at=_now())
    _write_json(write_json, meta)
    if mode == "replace":  # the CSV first: readers only trust a CSV with its JSON
        os.replace(write_csv, csv_path)
        os.replace(write_json, json_path)
    return csv_path


def record(experiments: str | Iterable[str] | None = None, out: str | os.PathLike = "data", *,
           quick: bool = False, progress: bool = True, resume: bool = True) -> list[Path]:
    """Run experiments on this machine and write ``out/<device-slug>/<name>.csv`` + ``.json`` each.

    ``experiments``: names (or one name); ``None`` runs every registered experiment. Experiments
    whose ``needs`` (``'cuda'``, ``'cupy'``, ``'triton'``) this machine lacks are skipped with a
    printed reason. ``quick`` runs the small sweeps; ``progress`` shows progress bars; ``resume``:
    see the module docstring. Returns the CSV paths of the completed recordings.

    Raises ``ValueError`` when this machine has no GPU and ``out`` is the repository's ``data/``,
    ``LookupError`` for an unknown name, :class:`RecordingFailed` (after the others ran) when an
    experiment raised, and re-raises ``KeyboardInterrupt`` after saving what was measured.
    """
    from .devices import current_device

    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a folder path (str or os.PathLike), got {out!r}")
    for flag, value in (("quick", quick), ("progress", progress), ("resume", resume)):
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be True or False, got {value!r}")
    out = Path(out)
    chosen = _resolve(experiments)
    device = current_device()
    _check_out(out, device)
    env = environment()
    print(f"perfkit: recording {len(chosen)} experiment(s) on {device.label} into {out}"
          f"{' (quick)' if quick else ''}", flush=True)
    written: list[Path] = []
    failed: dict[str, str] = {}
    t_all = time.perf_counter()
    for i, exp in enumerate(chosen, 1):
        missing = _unmet(exp)
        if missing:
            print(f"[{i}/{len(chosen)}] {exp.name}: skipped, this machine lacks {', '.join(missing)}", flush=True)
            continue
        print(f"[{i}/{len(chosen)}] {exp.name}: {exp.description}", flush=True)
        t0 = time.perf_counter()
        try:
            path = _record_one(exp, out, device, env, quick=quick, progress=progress, resume=resume)
        except KeyboardInterrupt:
            print(f"[{i}/{len(chosen)}] {exp.name}: interrupted after {time.perf_counter() - t0:.1f} s; "
                  "rows measured so far are kept (complete=false)", flush=True)
            raise
        except Exception as e:  # noqa: BLE001  (noted in the JSON; the other experiments still run)
            failed[exp.name] = f"{type(e).__name__}: {e}"
            print(f"[{i}/{len(chosen)}] {exp.name}: FAILED after {time.perf_counter() - t0:.1f} s: "
                  f"{type(e).__name__}: {e}", flush=True)
            traceback.print_exc()
            continue
        finally:
            if "torch" in sys.modules and cuda_available():
                sys.modules["torch"].cuda.empty_cache()
        written.append(path)
        rows = json.loads(path.with_suffix(".json").read_text())["rows"]
        print(f"[{i}/{len(chosen)}] {exp.name}: {rows} rows in {time.perf_counter() - t0:.1f} s → {path}",
              flush=True)
    print(f"perfkit: recorded {len(written)} of {len(chosen)} experiment(s) in "
          f"{time.perf_counter() - t_all:.1f} s", flush=True)
    if failed:
        raise RecordingFailed(failed, written)
    return written


def archive(out_dir: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Pack the recording folder ``out_dir`` into the single ``.tar.gz`` file ``path``.

    The archive holds ``<out_dir name>/<device-slug>/<experiment>.csv|.json``; hidden files
    (reruns in progress, interrupted reruns) are left out. Returns ``path``.
    """
    src, dst = Path(out_dir), Path(path)
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
