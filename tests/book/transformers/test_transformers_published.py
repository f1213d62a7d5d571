"""perfkit.book.transformers.published: NVIDIA's cuDNN attention benchmarks (H200, B200, GB200) beside
our ``attention_backends`` recording. Synthetic tables check the selection and the shares; the test
marked ``published`` reads the real one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.transformers import published as tp
from perfkit.display import Note, Table
from perfkit.published_data import HOW_TO_GET
from testkit import framed

META = {"published_by": "NVIDIA cudnn-frontend", "published_date": "2025–2026", "timing": "several campaigns"}
EVENTS, CUPTI = "CUDA events, median", "CUPTI kernel-time sum, median"


def _row(device, pass_, tflops, measured, timing=CUPTI, **shape):
    row = {"device": device, "backend": "cudnn_fe", "dtype": "bfloat16", "batch": 1, "seq_q": 8192, "seq_kv": 8192,
           "heads_q": 64, "heads_kv": 8, "head_dim": 128, "head_dim_v": 128, "causal": True,
           "sliding_window": np.nan, "pass": pass_, "deterministic_bwd": False if pass_ == "bwd" else np.nan,
           "tflops": tflops, "timing": timing, "measured": measured}
    return {**row, **shape}


def cudnn_frame() -> pd.DataFrame:
    rows = [_row("H200", "fwd", 600.0, "2026-01-01"), _row("H200", "fwd", 640.0, "2026-02-27"),
            _row("H200", "bwd", 540.0, "2026-02-27"),
            _row("B200", "fwd", 1380.0, "2025-10-10", EVENTS, heads_q=128), _row("B200", "bwd", 990.0, "2025-10-10", EVENTS),
            _row("GB200", "fwd", 1600.0, "2026-02-26"), _row("GB200", "bwd", 1300.0, "2026-02-26"),
            _row("GB200", "bwd", 1100.0, "2026-02-26", deterministic_bwd=True),  # deterministic: left out
            _row("GB200", "fwd", 9999.0, "2026-04-24", causal=False),  # another shape: left out
            _row("GB200", "fwd", 9999.0, "2026-04-24", backend="pyt_cudnn"),  # not cuDNN's own
            _row("GB300", "fwd", 1900.0, "2026-02-26")]  # not asked for
    return framed(rows, META)


def recorded_frame() -> pd.DataFrame:
    rows = [{"backend": b, "seq": 8192, "head_dim": 128, "causal": c, "dtype": "bfloat16", "heads": 32, "tflops": t}
            for b, c, t in (("cudnn", True, 580.0), ("cudnn", False, 630.0), ("flash", True, 320.0))]
    return framed(rows, {"device_name": "NVIDIA H200", "recorded_at": "2026-11-26T00:00:00+00:00", "complete": True})


def test_cudnn_rows_keep_the_latest_campaign_of_the_shape_per_gpu_and_pass():
    rows = tp.cudnn_rows(cudnn_frame())
    assert list(zip(rows["device"], rows["pass"])) == [("H200", "fwd"), ("H200", "bwd"), ("B200", "fwd"),
                                                       ("B200", "bwd"), ("GB200", "fwd"), ("GB200", "bwd")]
    got = rows.set_index(["device", "pass"])
    assert got.loc[("H200", "fwd"), "tflops"] == 640.0 and got.loc[("GB200", "bwd"), "tflops"] == 1300.0
    for (gpu, _), r in got.iterrows():
        assert r["fraction"] == pytest.approx(r["tflops"] * 1e12 / pk.device_spec(gpu).peak_flop_s("bf16"))
    meta = rows.attrs["meta"]
    assert meta["device_name"] == "H200, B200, GB200" and meta["published_date"] == "2025-10-10 to 2026-02-27"
    assert meta["timing"] == f"H200, GB200: {CUPTI}; B200: {EVENTS}"
    assert tp.cudnn_rows(cudnn_frame(), causal=False, gpus=["GB200"])["tflops"].tolist() == [9999.0]


def test_attention_table_puts_our_recording_first_and_shares_of_the_peak():
    t = tp.attention_table(cudnn_frame(), recorded_frame())
    assert list(t["GPU"]) == ["H200", "H200", "B200", "GB200"]
    ours = t.iloc[0]
    assert ours["measured by"].startswith("ours") and ours["heads (Q/KV)"] == "32/32"
    assert ours["fwd share"] == pytest.approx(580e12 / pk.device_spec("H200").peak_flop_s("bf16"))
    assert np.isnan(ours["bwd (TFLOP/s)"])
    b200 = t.set_index("measured").loc["2025-10-10"]
    assert b200["measured by"] == "cuDNN" and b200["heads (Q/KV)"] == "128/8" and b200["bwd (TFLOP/s)"] == 990.0
    assert list(tp.attention_table(cudnn_frame())["GPU"]) == ["H200", "B200", "GB200"]  # nothing recorded


def test_show_attention_captions_both_sources_and_says_how_to_get_the_table():
    shown = tp.show_attention(cudnn_frame(), recorded_frame())
    assert isinstance(shown, Table)
    page = shown.shown.set_index("measured by")
    h200 = pk.device_spec("H200").peak_flop_s("bf16")
    assert page.loc["ours (SDPA)", "forward, TFLOP/s (share)"] == f"580 ({580e12 / h200:.0%})"
    assert page.loc["ours (SDPA)", "backward, TFLOP/s (share)"] == "—"  # not measured
    recorded = str(pk.provenance.source_of(recorded_frame()))
    assert recorded in shown.caption and META["published_by"] in shown.caption and EVENTS in shown.caption
    note = tp.show_attention(None, recorded_frame())
    assert isinstance(note, Note) and HOW_TO_GET in " ".join(note.text.split())
    assert tp.cudnn_rows(None) is None and tp.attention_table(None) is None


def test_bad_input_names_what_is_accepted():
    with pytest.raises(ValueError, match="cudnn_sdpa_training"):
        tp.cudnn_rows(pd.DataFrame({"device": ["B200"]}))
    with pytest.raises(TypeError, match="gpus"):
        tp.cudnn_rows(cudnn_frame(), gpus="B200")
    with pytest.raises(ValueError, match="seq"):
        tp.cudnn_rows(cudnn_frame(), seq=0)


@pytest.mark.published
def test_the_published_table_fused_attention_below_every_peak():
    rows = tp.cudnn_rows(pk.published("cudnn_sdpa_training"))
    assert set(rows["device"]) == set(tp.CUDNN_GPUS) and set(rows["pass"]) == {"fwd", "bwd"}
    assert ((rows["fraction"] > 0) & (rows["fraction"] < 1)).all()
    by = rows.set_index(["device", "pass"])["fraction"]
    for gpu in tp.CUDNN_GPUS:  # backward (five GEMMs, recompute) reaches less of the peak than forward
        assert by[gpu, "bwd"] < by[gpu, "fwd"]
