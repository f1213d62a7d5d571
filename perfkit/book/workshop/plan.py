"""The workshop plans: a 3-hour workshop and a one-day variant, as data the teaching page renders.

Each :class:`Block` says how many minutes it takes, which sections to present, the lab that runs
its live experiments (``labs/NN_name``), the question to ask the room, the problems to assign
(exercise ids of :mod:`perfkit.book.problems`) and the pitfalls. A plan's minutes add up to its
length (:func:`check_plan`, run when this module is imported).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """One block of a workshop: ``minutes`` of it, what to present and run, what to ask and assign."""

    title: str
    minutes: int
    present: str = ""  # the chapters and sections to present
    lab: str | None = None  # the lab page whose live experiments the room runs
    live: str = ""  # the one live experiment to run on the projector
    question: str = ""  # the question to ask the room
    problems: tuple[str, ...] = ()  # exercise ids to assign
    pitfalls: tuple[str, ...] = ()

    @property
    def is_break(self) -> bool:
        """A break or lunch: no content."""
        return self.lab is None and not self.present


CALIBRATE_FIRST = ("Colab: switch the runtime to a GPU before the first cell (Runtime → Change runtime type "
                   "→ T4 GPU), or every lab runs its CPU path.",
                   "The first cell calibrates (`perfkit calibrate --quick`, about 15 s): a free Colab T4 is "
                   "often shared or held at its 70 W power cap, so compare against what it measures, not its "
                   "datasheet.")
FIRST_RUN = "The first run of each kernel includes CUDA's start-up and cuBLAS's heuristics: run a live cell twice."

ROOFLINE = Block(
    "Your GPU and its roofline", 35, "Chapter 1 (background): the roofline, ops per byte, math- or memory-bound",
    "labs/01_roofline", "fc_batch: a 4096→4096 layer's forward GEMM as the batch grows past the ridge",
    "The calibration gives your GPU's ridge in FLOP per byte. From which batch is a 4096 → 4096 layer "
    "math-bound on it?",
    ("lab-1", "background-2", "background-3"), (*CALIBRATE_FIRST,))
GEMM = Block(
    "GEMM shapes: alignment, tiles and waves", 50,
    "Chapter 2 (GEMM), sections 1–6; chapter 3 (fully connected), the batch and the features",
    "labs/02_gemm", "gemm_sizes and gemm_alignment: throughput as the GEMM grows; K one off a multiple of 8",
    "Why can K = 4095 cost more than K = 4096, although it is less work?",
    ("lab-2", "gemm-1", "gemm-3"), (FIRST_RUN, "A T4 has no BF16 Tensor Cores: the labs use FP16 on it."))
MEMORY = Block(
    "Memory-limited layers", 40, "Chapter 6 (memory-limited layers); chapter 5's first convolution, briefly",
    "labs/03_memory_bound", "activation_sizes: a ReLU's time, flat while launch-bound, then growing with its bytes",
    "At how many elements does a ReLU stop being launch-bound on your GPU, and what decides it?",
    ("lab-3", "memory-2"), ("A CPU has no launch overhead to speak of: the flat part is a GPU's story, so show the "
                 "recording when the room has no GPU.",))
TRANSFORMERS = Block(
    "Transformers and your own model", 45,
    "Chapter 7 (transformers): attention and decoding; chapter 9: check your own model",
    "labs/04_transformers", "decode_steps: tokens per second of a decoding step as the batch grows",
    "Batch-1 decoding uses a few per cent of the GPU's FLOP/s. What limits it, and what would you change?",
    ("lab-4", "transformer-1"), ("LLaMA-7B's 4 layers need about 2 GB in FP16: a shared Colab GPU may already be full; "
                 "the lab checks before it allocates.",))


def _break(minutes: int, what: str = "Break") -> Block:
    return Block(what, minutes)


#: The 3-hour workshop: four blocks and a break.
THREE_HOUR: tuple[Block, ...] = (ROOFLINE, GEMM, _break(10), MEMORY, TRANSFORMERS)

#: The one-day variant (7 hours with lunch): the same labs, longer, with the layer chapters and a
#: block on timing and your own model.
ONE_DAY: tuple[Block, ...] = (
    Block(**{**ROOFLINE.__dict__, "minutes": 45}),
    Block(**{**GEMM.__dict__, "minutes": 60}),
    _break(15),
    Block("Layers: fully connected, convolutional, recurrent", 60,
          "Chapters 3, 4 and 5: batch, features, channels, hidden sizes; cuDNN against GEMMs",
          "labs/02_gemm", "conv_channels and rnn_hidden: channels and hidden sizes around multiples of 8 and 64",
          "Which rule of the FC/conv/RNN guides still holds on your GPU, and which has cuDNN made moot?",
          ("fc-1", "rnn-1", "conv-2"), (FIRST_RUN,)),
    _break(60, "Lunch"),
    Block(**{**MEMORY.__dict__, "minutes": 50}),
    Block(**{**TRANSFORMERS.__dict__, "minutes": 50, "problems": ("lab-4", "transformer-1", "transformer-2")}),
    _break(15),
    Block("Timing, and your own model's profile", 45,
          "Chapter 90 (how perfkit times); chapter 9: the advisor and a profiler trace read by perfkit",
          "labs/04_transformers", "advisor_layers: every distinct op of four models timed beside the advisor",
          "Where does the advisor's prediction miss on your GPU, and is it the model or the timing?",
          ("advisor-1", "timing-4"), ("Profiles of a first step include compilation and autotuning: "
                                    "profile a later step.",)),
    Block("Wrap-up: problems and questions", 20, "The rules page: every rule, its verdict and its evidence"),
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
