"""The problems of the appendix 91_model_accuracy, with answers computed by perfkit.

Both read what ``python -m perfkit validate`` reads: OpenXLA's published H100 GEMMs beside the GEMM
model (:func:`perfkit.validation.validation_table`), and a recording of ``data/`` beside today's models
(:func:`perfkit.book.check_your_model.families.predict_rows`).
"""

from __future__ import annotations

from functools import lru_cache

from ..exercise import Exercise
from ...data import load
from ...published_data import published
from ...published_data.xla import xla_rows
from ...validation import validation_table, with_predictions
from ..check_your_model.families import predict_rows
from ..check_your_model.held_out import error_stats
from ..check_your_model.report import _spec_for

CHAPTER = "91_model_accuracy"


@lru_cache(maxsize=None)
def _xla_bf16(half: str, predictor: str) -> float:
    """Median |predicted/measured − 1| of ``predictor`` ("model" or "roofline") on ``half`` of OpenXLA's
    published H100 bfloat16 GEMMs."""
    table = validation_table({"OpenXLA H100-SXM": with_predictions(xla_rows(published("xla_h100_gemm")))})
    row = table[(table["dtype"] == "bfloat16") & (table["half"] == half) & (table["predictor"] == predictor)]
    return float(row["median_abs"].iloc[0])


def _roofline_over_model(half: str = "held out") -> float:
    return _xla_bf16(half, "roofline") / _xla_bf16(half, "model")


@lru_cache(maxsize=None)
def _signed_error(recording: str) -> float:
    """Median (measured/predicted − 1) of ``recording`` on our H200, predicted as ``perfkit validate`` does."""
    frame = load(recording, device="nvidia-h200")
    return error_stats(predict_rows(recording, frame, _spec_for(frame.attrs["meta"]["device_name"]))["ratio"])[
        "median_signed"]


def _too_fast_or_slow(recording: str = "gemm_tile_quantization") -> str:
    return "too fast" if _signed_error(recording) > 0 else "too slow"


def _the_other_way() -> str:
    return "too slow" if _too_fast_or_slow() == "too fast" else "too fast"


EXERCISES: list[Exercise] = [
    Exercise(
        id="acc-1", chapter=CHAPTER,
        question=("On the held-out half of OpenXLA's published H100 bfloat16 GEMMs, by what factor is the "
                  "plain roofline's median |error| larger than the GEMM model's?"),
        solve=_roofline_over_model, unit="×", fmt="{:.1f}",
        hint="the GEMM table's 'roofline' and 'median' columns, on the bfloat16 row of the held-out half",
        mistakes=((lambda: _roofline_over_model("fit"),
                   "that is the fit half; the held-out half is the one no constant was chosen on"),)),
    Exercise(
        id="acc-2", chapter=CHAPTER,
        question=("The held-out recording gemm_tile_quantization has a median signed error of about +25 %. "
                  "Does the model predict those GEMMs too fast or too slow?"),
        solve=_too_fast_or_slow, choices=("too fast", "too slow"),
        hint="the signed error is measured ÷ predicted − 1",
        mistakes=((_the_other_way, "a positive error means the GPU took longer than predicted"),)),
]
