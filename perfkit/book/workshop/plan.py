"""The workshop plans: a 3-hour workshop and a one-day variant, as data the teaching page renders.

Each :class:`Block` says how many minutes it takes, the lab that runs its live experiments
(``labs/NN_name``) and the problems to assign (exercise ids of :mod:`perfkit.book.problems`); the
teaching page says the rest in prose, and a test holds the two together. A plan's minutes add up
to its length (:func:`check_plan`, run when this module is imported).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

#: The labs, in teaching order: page (without extension) → title.
LABS: dict[str, str] = {
    "labs/01_roofline": "Your GPU and its roofline",
    "labs/02_gemm": "GEMM shapes: alignment, tiles and waves",
    "labs/03_memory_bound": "Memory-limited layers",
    "labs/04_transformers": "Transformers and your own model",
}

#: Each lab's live experiments: page → registered experiment names, in the order the lab runs them.
LIVE: dict[str, tuple[str, ...]] = {
    "labs/01_roofline": ("fc_batch",),
    "labs/02_gemm": ("gemm_sizes", "gemm_alignment", "conv_channels", "rnn_hidden"),
    "labs/03_memory_bound": ("activation_sizes", "convnet_breakdown"),
    "labs/04_transformers": ("decode_steps", "advisor_layers"),
}


@dataclass(frozen=True)
class Block:
    """One block of a workshop: its ``title``, ``minutes``, the ``lab`` page whose live experiments the
    room runs (None for a break or the wrap-up), the problems it assigns (exercise ids) and its ``kind``.
    What to present, run, ask and watch out for is said once, on the teaching page (``teach.md``)."""

    title: str
    minutes: int
    lab: str | None = None
    problems: tuple[str, ...] = ()
    kind: str = "teach"  # "teach" or "break"

    @property
    def is_break(self) -> bool:
        """A break or lunch: no content."""
        return self.kind == "break"


ROOFLINE = Block("Your GPU and its roofline", 35, "labs/01_roofline", ("lab-1", "background-2", "background-3"))
GEMM = Block("GEMM shapes: alignment, tiles and waves", 50, "labs/02_gemm", ("lab-2", "gemm-1", "gemm-3"))
MEMORY = Block("Memory-limited layers", 40, "labs/03_memory_bound", ("lab-3", "memory-2"))
TRANSFORMERS = Block("Transformers and your own model", 45, "labs/04_transformers", ("lab-4", "transformer-1"))


def _break(minutes: int, what: str = "Break") -> Block:
    return Block(what, minutes, kind="break")


#: The 3-hour workshop: four blocks and a break.
THREE_HOUR: tuple[Block, ...] = (ROOFLINE, GEMM, _break(10), MEMORY, TRANSFORMERS)

#: The one-day variant (7 hours with lunch): the same labs, longer, with the layer chapters and a
#: block on timing and your own model.
ONE_DAY: tuple[Block, ...] = (
    replace(ROOFLINE, minutes=45),
    replace(GEMM, minutes=60),
    _break(15),
    Block("Layers: fully connected, convolutional, recurrent", 60, "labs/02_gemm", ("fc-1", "rnn-1", "conv-2")),
    _break(60, "Lunch"),
    replace(MEMORY, minutes=50),
    replace(TRANSFORMERS, minutes=50, problems=("lab-4", "transformer-1", "transformer-2")),
    _break(15),
    Block("Timing, and your own model's profile", 45, "labs/04_transformers", ("advisor-1", "timing-4")),
    Block("Wrap-up: problems and questions", 20),
)

#: Each plan's length in minutes.
LENGTHS = {"3-hour": 180, "one-day": 420}
PLANS = {"3-hour": THREE_HOUR, "one-day": ONE_DAY}


def check_plan(plan: tuple[Block, ...], minutes: int) -> None:
    """``ValueError`` unless ``plan``'s blocks add up to ``minutes`` and each names a known lab."""
    total = sum(b.minutes for b in plan)
    if total != minutes:
        raise ValueError(f"the blocks add up to {total} minutes, not {minutes}")
    unknown = [b.lab for b in plan if b.lab is not None and b.lab not in LABS]
    if unknown:
        raise ValueError(f"blocks name labs that do not exist: {unknown}; labs: {list(LABS)}")


def timetable(plan: str = "3-hour", *, start: str = "09:00") -> pd.DataFrame:
    """The plan as a table: start time, minutes, block, lab (``Lab 1`` … in the order of :data:`LABS`).
    ``plan`` is ``"3-hour"`` or ``"one-day"``."""
    if plan not in PLANS:
        raise ValueError(f"plan must be one of {list(PLANS)}, got {plan!r}")
    clock = pd.Timestamp(f"2000-01-01 {start}")
    rows = []
    for b in PLANS[plan]:
        rows.append({"start": clock.strftime("%H:%M"), "minutes": b.minutes, "block": b.title,
                     "lab": f"Lab {list(LABS).index(b.lab) + 1}" if b.lab else ""})
        clock += pd.Timedelta(minutes=b.minutes)
    return pd.DataFrame(rows)


def assigned_problems() -> list[str]:
    """Every exercise id the plans assign, each once, in teaching order."""
    return list(dict.fromkeys(p for plan in PLANS.values() for b in plan for p in b.problems))


for _name, _plan in PLANS.items():
    check_plan(_plan, LENGTHS[_name])
