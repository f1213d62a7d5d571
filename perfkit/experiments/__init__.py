"""Experiments: one function per measured figure, shared by the chapters, the recorder and the tests.

An experiment is a plain function that measures and returns a tidy ``pandas.DataFrame`` (one row
per measurement). Every experiment accepts these keyword arguments:

- ``on_row``: called with each row (a ``dict``) as soon as it is measured, so a recorder can write
  it before the next measurement starts; an interrupted sweep keeps every row it measured;
- ``progress``: show a tqdm progress bar (default ``True``);
- ``quick``: a small version of the sweep (for tests and CPU runs).

Experiments never draw; :mod:`perfkit.plots` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import pandas as pd


@dataclass(frozen=True)
class Experiment:
    """A registered experiment: its function, what its columns mean, and what it needs to run."""

    name: str
    func: Callable[..., pd.DataFrame]
    description: str
    columns: Mapping[str, str] = field(default_factory=dict)  # column -> meaning, with units
    needs: tuple[str, ...] = ()  # subset of ("cuda", "cupy", "triton")

    def __call__(self, **kwargs) -> pd.DataFrame:
        return self.func(**kwargs)


#: Every experiment the book uses, by name (filled in by the modules below at import time).
REGISTRY: dict[str, Experiment] = {}


def register(name: str, description: str, columns: Mapping[str, str], needs: tuple[str, ...] = ()):
    """Decorator: add ``func`` to :data:`REGISTRY` under ``name``."""

    def wrap(func: Callable[..., pd.DataFrame]) -> Callable[..., pd.DataFrame]:
        if name in REGISTRY:
            raise ValueError(f"experiment {name!r} is registered twice")
        REGISTRY[name] = Experiment(name, func, description, dict(columns), tuple(needs))
        func.experiment_name = name  # type: ignore[attr-defined]
        return func

    return wrap


def get(name: str) -> Experiment:
    """The registered experiment called ``name`` (``LookupError`` lists the known names)."""
    _load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        raise LookupError(f"unknown experiment {name!r}; registered: {', '.join(sorted(REGISTRY))}") from None


def missing_needs(experiment: Experiment) -> list[str]:
    """The requirements of ``experiment`` ("cuda", "cupy", "triton") this machine does not meet."""
    import importlib.util

    from ..devices import cuda_available

    missing = []
    for need in experiment.needs:
        if need == "cuda":
            if not cuda_available():
                missing.append("cuda")
        elif importlib.util.find_spec(need) is None:
            missing.append(need)
    return missing


def run_or_load(name: str, *, device: str | None = None, **kwargs) -> tuple[pd.DataFrame | None, str]:
    """Measure experiment ``name`` live when this machine can, else load its recording.

    Returns ``(frame, source)`` where ``source`` is the label every figure carries:
    ``"live on <device>, <date>"``, ``"recorded on <device> on <date>"``, or, when neither is
    possible, ``(None, <why>)`` so the chapter can say plainly that no recording exists yet.
    ``device`` picks a recording (a device slug or name); extra keyword arguments go to the experiment.
    With the environment variable ``PERFKIT_QUICK=1``, live runs use the experiments' quick sweeps
    (for fast checks on a GPU); their label says so.
    """
    import datetime
    import os

    from .. import data
    from ..devices import current_device

    exp = get(name)
    if not missing_needs(exp):
        quick = os.environ.get("PERFKIT_QUICK", "") == "1"
        if quick:
            kwargs.setdefault("quick", True)
        frame = exp(**kwargs)
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        return frame, f"live{' (quick sweep)' if kwargs.get('quick') else ''} on {current_device().label}, {when}"
    try:
        frame = data.load(name, device=device)
    except LookupError:
        return None, (f"no GPU here ({', '.join(missing_needs(exp))} missing) and no recording of "
                      f"{name!r} in data/ yet: run `python -m perfkit record {name}` on a GPU to make one")
    return frame, data.describe_source(frame.attrs["meta"])


def _load_all() -> None:
    from . import background, ceilings, gemm, timers  # noqa: F401  (registration side effects)
