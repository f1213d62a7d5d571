"""What every lab shares: the machine check, the calibration, and live runs that state their time first.

    >>> from perfkit.book import workshop
    >>> spec = workshop.start()                  # calibrate (quick) and say what this machine will run
    >>> frame = workshop.live("gemm_sizes", spec) # "about 2 s here, about 6 s on a T4", then the sweep

A lab runs registered experiments (:mod:`perfkit.experiments`) with its quick settings
(:func:`quick_settings`): small sweeps, FP16 on a GPU and FP32 on a CPU (a CPU's FP16 matmul is
emulated and slow). Before running, :func:`live` prints the run's predicted time on this machine and
on a T4 (:func:`perfkit.book.workshop.estimate.estimate_run`); after, the time it took.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd

from ... import placement
from ...calibration import calibrate
from ...devices import DeviceSpec, current_device, device_spec
from ...display import Note, note, show
from ...experiments import registry
from ...units import format_time
from .estimate import RunEstimate, estimate_run
from .plan import LIVE

#: The GPU a workshop room most often has: Colab's free T4.
ROOM_GPU = "T4"

#: Each live experiment's quick settings; ``{dtype}`` is the lab's dtype on this machine.
QUICK: dict[str, dict[str, Any]] = {
    "fc_batch": {"quick": True, "dtype": "{dtype}"},
    "gemm_sizes": {"quick": True, "dtypes": ("{dtype}",)},
    "gemm_alignment": {"quick": True, "dtypes": ("{dtype}",)},
    "conv_channels": {"quick": True, "dtypes": ("{dtype}",)},
    "rnn_hidden": {"quick": True, "dtype": "{dtype}"},
    "activation_sizes": {"quick": True, "ops": ("relu", "gelu"), "dtype": "{dtype}"},
    "convnet_breakdown": {"quick": True, "dtype": "{dtype}"},
    "decode_steps": {"quick": True, "dtype": "{dtype}"},
    "advisor_layers": {"quick": True, "dtype": "{dtype}"},
}


def lab_dtype(spec: DeviceSpec) -> str:
    """The dtype a lab measures in: ``"float16"`` on a GPU (a T4 has no BF16 Tensor Cores), ``"float32"``
    on a CPU."""
    return "float16" if spec.kind == "gpu" else "float32"


def quick_settings(name: str, spec: DeviceSpec) -> dict[str, Any]:
    """The keyword arguments a lab passes to experiment ``name`` on ``spec``. ``LookupError`` for an
    experiment no lab runs."""
    if name not in QUICK:
        raise LookupError(f"no lab runs experiment {name!r}; the labs run {', '.join(QUICK)}")
    dtype = lab_dtype(spec)

    def fill(v: Any) -> Any:
        if v == "{dtype}":
            return dtype
        return tuple(fill(x) for x in v) if isinstance(v, tuple) else v

    return {k: fill(v) for k, v in QUICK[name].items()}


def machine_note(spec: DeviceSpec) -> Note | None:
    """What this machine means for the lab, as a styled note; None on a GPU perfkit's table knows."""
    if spec.kind != "gpu":
        return note("No GPU here, so this lab runs its CPU path: the same experiments with small sweeps in "
                    "FP32 on this CPU, beside our H200 recording and perfkit's prediction for a T4. On Colab: "
                    "Runtime → Change runtime type → T4 GPU, then run the lab again.", title="No GPU")
    if str(spec.sources.get("name", "")).startswith("not in perfkit's table"):
        return note(f"perfkit's table does not know this GPU ({spec.name}): its peaks were measured with quick "
                    "matmuls, and the calibration below measures its ceilings; the predictions use those.",
                    title="A GPU perfkit does not know")
    return None


def start(*, quick: bool = True) -> DeviceSpec:
    """A lab's first cell: say what this machine is, calibrate it (``perfkit calibrate --quick``: about
    15 s; not saved, so no later notebook changes) and return the calibrated spec."""
    spec = current_device()
    found = machine_note(spec)
    if found is not None:
        show(found)
    cal = calibrate(quick=quick, save=False)
    show(cal)
    return cal.spec


def estimates(name: str, spec: DeviceSpec) -> tuple[RunEstimate, RunEstimate]:
    """The predicted time of the lab's run of ``name`` here (``spec``) and on a T4, before it runs."""
    here = estimate_run(name, spec, **quick_settings(name, spec))
    room = device_spec(ROOM_GPU)
    return here, estimate_run(name, room, **quick_settings(name, room))


def run_times(lab: str, here: DeviceSpec | None = None) -> pd.DataFrame:
    """Each live run of ``lab`` (``"labs/02_gemm"``): its points and predicted seconds on a T4 and, given
    ``here``, on that device (perfkit's models, before anything runs). ``LookupError`` for an unknown lab."""
    if lab not in LIVE:
        raise LookupError(f"unknown lab {lab!r}; labs: {', '.join(LIVE)}")
    room = device_spec(ROOM_GPU)
    rows = []
    for name in LIVE[lab]:
        t4 = estimate_run(name, room, **quick_settings(name, room))
        row = {"experiment": name, "points": t4.points, "T4 (predicted)": t4.run_s}
        if here is not None:
            row["here (predicted)"] = estimate_run(name, here, **quick_settings(name, here)).run_s
        rows.append(row)
    return pd.DataFrame(rows)


def live(name: str, spec: DeviceSpec) -> pd.DataFrame | None:
    """Run experiment ``name`` with the lab's quick settings on this machine (its predictions for
    ``spec``, the calibrated device), saying first how long it should take here and on a T4, and after
    how long it took. An experiment that needs a package this machine lacks (Triton, CuPy), or more
    memory than the device has free, is not run: a note says so and None is returned (a lab's figure
    functions show a note for None)."""
    if name not in LIVE_EXPERIMENTS:
        raise LookupError(f"no lab runs experiment {name!r}; the labs run {', '.join(LIVE_EXPERIMENTS)}")
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"spec must be the DeviceSpec workshop.start() returned, got {type(spec).__name__}")
    experiment = registry.get(name)
    lacking = [n for n in registry.missing_needs(experiment) if n != "cuda"]
    if lacking:
        show(note(f"{name} needs {', '.join(lacking)}, which this machine lacks: skipped "
                  f"(`pip install {' '.join(lacking)}` to run it).", title="Skipped"))
        return None
    try:  # a sweep that does not fit the free memory (a shared GPU) is refused before anything is allocated
        here, t4 = estimates(name, spec)
        where = "this GPU" if spec.kind == "gpu" else "this CPU"
        print(f"{name}: {here.points} points; expected about {format_time(here.run_s)} on {where}, "
              f"about {format_time(t4.run_s)} on a T4 (perfkit's models, before running)")
        t0 = time.perf_counter()
        with placement.use(spec=spec):
            frame = experiment(**quick_settings(name, spec))
    except ValueError as e:
        show(note(f"{name} was not run: {e}. The rest of the lab runs.", title="Skipped"))
        return None
    print(f"{name}: took {format_time(time.perf_counter() - t0)}")
    return frame


#: Every experiment some lab runs live.
LIVE_EXPERIMENTS: tuple[str, ...] = tuple(dict.fromkeys(n for names in LIVE.values() for n in names))
