"""The newest GPUs in the validation table: AMD AITER's GEMMs and the MAMF finder's best shapes, labelled fit,
held out or not fitted as the constants were fitted (perfkit.achievable.AMD_FIT, ACHIEVABLE_FRACTIONS)."""

import numpy as np
import pytest

from perfkit.gemm_model import prediction_error
from perfkit.meta import FrameMeta
from perfkit.published_data import HOW_TO_GET, has_published, published
from perfkit.published_data.newest import aiter_rows, mamf_rows
from perfkit.validation import fit_half, half_labels, validation_frames

needs_newest = pytest.mark.skipif(not (has_published("aiter_gemm") and has_published("mamf_newest")),
                                  reason=HOW_TO_GET)


@pytest.fixture(scope="module")
def newest():
    frames = validation_frames()
    return {FrameMeta.of(f).device + (" mamf" if "ml-engineering" in n else " aiter"): f
            for n, f in frames.items() if "AITER" in n or "ml-engineering" in n}


@needs_newest
def test_aiter_rows_are_gemms_in_the_linear_layout_with_canonical_dtypes():
    rows = aiter_rows(published("aiter_gemm"))
    assert set(rows["dtype"]) == {"bfloat16", "float8", "int8"} and set(rows["layout"]) == {"NT"}
    assert (rows["batch"] >= 1).all() and aiter_rows(rows).equals(rows)  # its own result only filters
    assert set(aiter_rows(rows, dtype="bf16")["dtype"]) == {"bfloat16"}
    with pytest.raises(ValueError, match="dtype must be one of"):
        aiter_rows(rows, dtype="float4")
    assert aiter_rows(None) is None and mamf_rows(None) is None
    mamf = mamf_rows(published("mamf_newest"))
    assert "" not in set(mamf["device"]) and set(mamf["dtype"]) <= {"bfloat16", "float8"}


@needs_newest
def test_halves_follow_what_was_fitted(newest):
    mi355x, mi300x = newest["MI355X aiter"], newest["MI300X aiter"]
    halves = half_labels(mi355x)
    bf16 = mi355x["dtype"] == "bfloat16"
    assert set(halves[bf16]) == {"fit", "held out"} and set(halves[~bf16]) == {"not fitted"}
    assert (halves[bf16] == "fit").equals(fit_half(mi355x)[bf16])
    assert set(half_labels(mi300x)) == {"not fitted"}
    for name in ("MI300X", "MI325X", "MI355X"):  # MAMF's AMD rows set those parts' fractions
        assert set(half_labels(newest[f"{name} mamf"])) == {"fit"}
    for name in ("B200", "B300", "GB200"):  # nothing Blackwell fitted anything
        assert set(half_labels(newest[f"{name} mamf"])) == {"not fitted"}


@needs_newest
def test_every_new_row_is_predicted_and_the_held_out_score_is_computed(newest):
    for f in newest.values():
        assert np.isfinite(f["predicted_s"]).all() and (f["predicted_s"] >= f["roofline_s"]).all()
    mi355x = newest["MI355X aiter"]
    held = mi355x[(half_labels(mi355x) == "held out")]
    e = prediction_error(held["time_s"], held["predicted_s"])
    # the script prints this figure; here: a real spread, neither perfect nor wild
    assert 0.0 < e["median_abs"] < 0.5 and e["n"] == len(held) > 500
