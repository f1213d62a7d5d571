"""The experiment registry: what each experiment measures, the columns it returns, what it needs.

:func:`register` wraps an experiment function so that every call, whoever makes it (a chapter,
the recorder, a test), returns a frame whose columns are exactly the declared ones, in the
declared order, with the run's metadata in ``frame.attrs["meta"]`` (``live: true``, the device
it ran on, when, and its parameters). A frame that drifts from its declaration is an error.
Before the experiment runs, the options every experiment takes are checked (:func:`check_options`);
each experiment checks its own arguments before it allocates or times anything.

Which experiments exist is said by a *catalog*: a module whose ``EXPERIMENTS`` dict maps each
experiment's name to the module whose ``@register`` defines it, in the recorder's order. The
library never names the catalog itself: the layer above tells it which one with
:func:`use_catalog` (``perfkit/__init__.py``: ``use_catalog("perfkit.book.chapters")``).
:func:`get` imports the listed module on every call (cheap once imported; a module that failed
to import is tried again, and fails again, loudly), so the registry is never silently partial.
An experiment registered by a module outside the catalog (a script's, a test's) is known too,
after the catalog's.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib
import importlib.util
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Callable, Iterator

import pandas as pd

from .._validate import boolean, callable_or_none, one_of
from ..device_runtime import gpu_runtime
from ..devices import cpu_name, cuda_available, current_device

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

    @property
    def module(self) -> str:
        """The module whose ``@register`` defined this experiment."""
        return self.func.__module__


_catalog_module: str | None = None
#: Experiment name → (module, qualified name) of the function :func:`register` was given for it.
_registered: dict[str, tuple[str, str]] = {}
#: Experiment name → the Experiment :func:`register` made (or a test's stand-in, see :class:`Registry`).
_experiments: dict[str, Experiment] = {}


def use_catalog(module: str) -> None:
    """Read the experiments' catalog from ``module`` (by name, imported when first needed): its
    ``EXPERIMENTS`` dict maps each experiment's name to the module that registers it."""
    global _catalog_module
    if not isinstance(module, str) or not module:
        raise TypeError(f"use_catalog takes a module name (a string), got {module!r}")
    _catalog_module = module


def catalog() -> dict[str, str]:
    """Experiment name → the module that registers it, in the recorder's order (empty without a catalog)."""
    if _catalog_module is None:
        return {}
    return dict(importlib.import_module(_catalog_module).EXPERIMENTS)


def _import_for(name: str, module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception as e:  # noqa: BLE001  (re-raised, naming the experiment and its module)
        raise ImportError(f"experiment {name!r}: its chapter module {module} failed to import: "
                          f"{type(e).__name__}: {e}") from e


def get(name: str) -> Experiment:
    """The experiment called ``name``: its catalog module is imported (on every call: an import that
    failed fails again, as an ``ImportError`` naming the module and the original error), then the
    experiment it registered is returned. An experiment registered outside the catalog (by a script,
    a test) is returned as it is. ``LookupError`` lists the known names."""
    module = catalog().get(name) if isinstance(name, str) else None
    if module is None:
        if isinstance(name, str) and name in _experiments:
            return _experiments[name]
        raise LookupError(f"unknown experiment {name!r}; registered: {', '.join(sorted(REGISTRY.names()))}")
    _import_for(name, module)
    origin = _registered.get(name, ("", ""))[0]
    if origin != module:
        found = sorted(n for n, (m, _) in _registered.items() if m == module)
        raise LookupError(f"experiment {name!r}: the catalog lists it in {module}, which does not register it "
                          f"(it registers {found or 'nothing'}{f'; {origin} registers {name!r}' if origin else ''})")
    return _experiments[name]


class Registry(Mapping):
    """Every experiment, by name: the catalog's (:func:`catalog`), in its order, each read through
    :func:`get` (its module imported), then those registered outside the catalog (a script's, a test's).

    A read-only mapping (``in``, ``len`` and :meth:`names` import nothing), filled by ``@register``.
    Two writes are allowed, for tests: ``registry[name] = experiment`` puts a stand-in for a known
    experiment (``monkeypatch.setitem``), and ``del``/``pop`` remove one registered outside the catalog."""

    def names(self) -> list[str]:
        """The known names, in order, without importing anything."""
        listed = catalog()
        return [*listed, *(n for n in _experiments if n not in listed)]

    def __getitem__(self, name: str) -> Experiment:
        try:
            return get(name)
        except ImportError:
            raise
        except LookupError as e:
            raise KeyError(name) from e

    def __iter__(self) -> Iterator[str]:
        return iter([get(n).name for n in self.names()])  # every catalog module imported, in order

    def __len__(self) -> int:
        return len(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __setitem__(self, name: str, experiment: Experiment) -> None:
        if not isinstance(experiment, Experiment) or experiment.name != name:
            raise TypeError(f"registry[{name!r}] takes an Experiment named {name!r}, got {experiment!r}")
        get(name)  # a known experiment (its module imported first, so that it does not overwrite the stand-in)
        _experiments[name] = experiment

    def __delitem__(self, name: str) -> None:
        if name in catalog():
            raise TypeError(f"experiment {name!r} is in the catalog; it cannot be removed")
        del _experiments[name]
        _registered.pop(name, None)

    def pop(self, name: str, *default: Any) -> Any:
        if name not in _experiments and default:
            return default[0]
        value = _experiments[name]  # KeyError for an unknown name
        del self[name]
        return value

    def __repr__(self) -> str:
        return f"Registry({self.names()!r})"


#: Every experiment, by name (the catalog's, each imported from its module when read).
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
    """Decorator: add the function to :data:`REGISTRY` as ``name`` and check its output on every call.

    A name taken by another function is refused; the same function registered again (its module
    imported again after a failed import) replaces itself."""
    if not set(needs) <= set(NEEDS):
        raise ValueError(f"needs must be a subset of {NEEDS}, got {needs!r}")
    if "time_s" not in columns:
        raise ValueError(f"experiment {name!r} must declare a 'time_s' column (seconds)")

    def wrap(func: Callable[..., pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        where = (func.__module__, func.__qualname__)
        if _registered.setdefault(name, where) != where:  # the same function again: its module imported again
            raise ValueError(f"experiment {name!r} is registered twice: by {'.'.join(_registered[name])} "
                             f"and by {'.'.join(where)}")

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
        _experiments[name] = Experiment(name, run, description, dict(columns), tuple(needs))
        return run

    return wrap


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
        elif need == "cupy" and gpu_runtime() == "rocm":  # perfkit's CuPy kernels are NVIDIA-only
            missing.append("cupy")
        elif importlib.util.find_spec(need) is None:
            missing.append(need)
    return missing


def gpu_count() -> int:
    """CUDA GPUs torch sees (0 without CUDA): what the need ``"gpus2"`` asks for."""
    if not cuda_available():
        return 0
    import torch

    return torch.cuda.device_count()
