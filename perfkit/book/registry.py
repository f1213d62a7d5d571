"""The experiment registry: what each experiment measures, the columns it returns, what it needs.

:func:`register` wraps an experiment function so that every call, whoever makes it (a chapter,
the recorder, a test), returns a frame whose columns are exactly the declared ones, in the
declared order, with the run's metadata in ``frame.attrs["meta"]`` (``live: true``, the device
it ran on, when, and its parameters). A frame that drifts from its declaration is an error.
Before the experiment runs, the options every experiment takes are checked (:func:`check_options`);
each experiment checks its own arguments before it allocates or times anything.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd

from .._validate import boolean, callable_or_none, one_of
from ..devices import cpu_name, cuda_available, current_device
from .chapters import CHAPTERS

#: What an experiment may need: a CUDA GPU, CuPy, Triton.
NEEDS: tuple[str, ...] = ("cuda", "gpus2", "cupy", "triton")  # gpus2: two or more CUDA GPUs


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: its function, what its columns mean, and what it needs to run."""

    name: str
    func: Callable[..., pd.DataFrame]
    description: str
    columns: Mapping[str, str] = field(default_factory=dict)  # column → meaning, with units
    needs: tuple[str, ...] = ()  # subset of NEEDS

    def __call__(self, **kwargs) -> pd.DataFrame:
        return self.func(**kwargs)


#: Recorded first, whatever the chapter order: the ceilings, timers and GEMMs the model and the other chapters rest on.
FIRST = ("perfkit.book.background.ceilings", "perfkit.book.timing.experiments", "perfkit.book.gemm.experiments")


class Registry(dict):
    """A ``name → Experiment`` dict that imports every chapter folder (:data:`CHAPTERS`) the first time
    it is read, so it always lists every experiment, in the recorder's order (:data:`FIRST`, then the
    chapters in reading order)."""

    _loaded = False

    def _load(self) -> None:
        if Registry._loaded:
            return
        Registry._loaded = True
        for name in CHAPTERS:  # each chapter folder registers its experiments when imported
            importlib.import_module(f"perfkit.book.{name}")
        first, chapters = {m: i for i, m in enumerate(FIRST)}, list(CHAPTERS)

        def order(item: tuple[str, Experiment]) -> tuple[int, int]:
            module = item[1].func.__module__
            folder = module.split(".")[2] if module.startswith("perfkit.book.") else ""
            return first.get(module, len(FIRST)), chapters.index(folder) if folder in chapters else len(chapters)

        items = sorted(dict.items(self), key=order)
        dict.clear(self)
        dict.update(self, items)

    def __getitem__(self, name):
        self._load()
        return dict.__getitem__(self, name)

    def __iter__(self):
        self._load()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._load()
        return dict.__len__(self)

    def __contains__(self, name) -> bool:
        self._load()
        return dict.__contains__(self, name)

    def keys(self):
        self._load()
        return dict.keys(self)

    def values(self):
        self._load()
        return dict.values(self)

    def items(self):
        self._load()
        return dict.items(self)

    def get(self, name, default=None):
        self._load()
        return dict.get(self, name, default)


#: Every experiment the book uses, by name (each chapter folder registers its own when imported).
REGISTRY: Registry = Registry()


#: The devices an experiment accepts: ``"auto"`` picks CUDA when a GPU is visible.
DEVICES: tuple[str, ...] = ("auto", "cuda", "cpu")


def check_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` with ``device`` lower-cased; ``TypeError``/``ValueError`` naming the option unless
    ``device`` is one of :data:`DEVICES`, ``quick`` and ``progress`` are booleans and ``on_row`` is
    a callable or None (those given)."""
    out = dict(kwargs)
    if "device" in out:
        out["device"] = one_of("device", out["device"], DEVICES)
    for name in ("quick", "progress"):
        if name in out:
            out[name] = boolean(name, out[name])
    if "on_row" in out:
        callable_or_none("on_row", out["on_row"])
    return out


def _run_meta(name: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    on_cpu = kwargs.get("device", "auto") == "cpu" or not cuda_available()
    return {"experiment": name, "live": True, "device_name": cpu_name() if on_cpu else current_device().label,
            "device_kind": "cpu" if on_cpu else "gpu",
            "measured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "params": {"quick": bool(kwargs.get("quick", False))}}


def conform(frame: pd.DataFrame, columns: Mapping[str, str], name: str) -> pd.DataFrame:
    """``frame`` with exactly the declared ``columns`` in their order; ``ValueError`` if they differ."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"experiment {name!r} returned {type(frame).__name__}, not a pandas DataFrame")
    if frame.empty and len(frame.columns) == 0:  # no rows measured (e.g. a resumed run with nothing left)
        return pd.DataFrame(columns=list(columns))
    missing = [c for c in columns if c not in frame.columns]
    extra = [c for c in frame.columns if c not in columns]
    if missing or extra:
        raise ValueError(f"experiment {name!r} returned columns that differ from its declaration: "
                         f"missing {missing}, undeclared {extra}")
    return frame[list(columns)]


def register(name: str, description: str, columns: Mapping[str, str], needs: tuple[str, ...] = ()):
    """Decorator: add the function to :data:`REGISTRY` as ``name`` and check its output on every call."""
    if not set(needs) <= set(NEEDS):
        raise ValueError(f"needs must be a subset of {NEEDS}, got {needs!r}")
    if "time_s" not in columns:
        raise ValueError(f"experiment {name!r} must declare a 'time_s' column (seconds)")

    def wrap(func: Callable[..., pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        if dict.__contains__(REGISTRY, name):
            raise ValueError(f"experiment {name!r} is registered twice")

        @functools.wraps(func)
        def run(**kwargs) -> pd.DataFrame:
            kwargs = check_options(kwargs)
            meta = _run_meta(name, kwargs)
            frame = conform(func(**kwargs), columns, name)
            if meta["device_kind"] == "gpu" and "device" in frame and len(frame) and (frame["device"] == "cpu").all():
                meta.update(device_name=cpu_name(), device_kind="cpu")  # it ran on the CPU, a GPU beside it
            frame.attrs["meta"] = meta
            return frame

        run.experiment_name = name  # type: ignore[attr-defined]
        dict.__setitem__(REGISTRY, name, Experiment(name, run, description, dict(columns), tuple(needs)))
        return run

    return wrap


def get(name: str) -> Experiment:
    """The registered experiment called ``name`` (``LookupError`` lists the known names)."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise LookupError(f"unknown experiment {name!r}; registered: {', '.join(sorted(REGISTRY))}") from None


def missing_needs(experiment: Experiment) -> list[str]:
    """The requirements of ``experiment`` (from :data:`NEEDS`) this machine does not meet."""
    missing = []
    for need in experiment.needs:
        if need == "cuda":
            if not cuda_available():
                missing.append("cuda")
        elif need == "gpus2":
            if gpu_count() < 2:
                missing.append("gpus2")
        elif importlib.util.find_spec(need) is None:
            missing.append(need)
    return missing


def gpu_count() -> int:
    """CUDA GPUs torch sees (0 without CUDA): what the need ``"gpus2"`` asks for."""
    if not cuda_available():
        return 0
    import torch

    return torch.cuda.device_count()
