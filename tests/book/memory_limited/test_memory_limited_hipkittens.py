"""perfkit.book.memory_limited.hipkittens: fused against eager memory-bound kernels on AMD's MI355X
(HipKittens' published benchmarks). A synthetic table checks the bandwidth each row implies; the
test marked ``published`` reads the real one."""

from __future__ import annotations

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.memory_limited import hipkittens as hk
from testkit import framed

META = {"published_by": "HipKittens (Hazy Research)", "published_date": "2025", "timing": "the mean of 100 calls",
        "caveat": "ROCm 7.0 preview; baselines give TFLOP/s only; layernorm's reference moves more bytes."}


def kittens_frame() -> pd.DataFrame:
    """Two lengths of each kernel: the longer one (4096) is the one shown; a GEMM row and an MI325X row
    that must be left out."""
    rows = []
    for op, nbytes in (("layernorm", 1e9), ("rotary", 5e8)):
        for seq, scale in ((1024, 0.25), (4096, 1.0)):
            for lib, t in (("hipkittens", 0.25e-3), ("torch_compile", 0.4e-3), ("torch_eager", 1e-3)):
                rows.append({"device": "MI355X", "op": op, "library": lib, "seq": seq, "io_bytes_min": nbytes * scale,
                             "time_s": t * scale})
    rows.append({"device": "MI355X", "op": "gemm", "library": "hipkittens", "seq": None, "io_bytes_min": 1.0,
                 "time_s": 1.0})
    rows.append({"device": "MI325X", "op": "layernorm", "library": "hipkittens", "seq": 8192, "io_bytes_min": 1e9,
                 "time_s": 1.0})
    return framed(rows, META)


def test_bandwidth_is_bytes_over_time_at_the_longest_length():
    rows = hk.bandwidth(kittens_frame())
    assert set(rows["seq"]) == {4096} and set(rows["op"]) == {"layernorm", "rotary"}
    assert list(rows["library"][:3]) == ["hipkittens", "torch_compile", "torch_eager"]  # fused first
    bw = pk.device_spec("MI355X").mem_bandwidth
    for r in rows.itertuples():
        assert r.gbps == pytest.approx(r.bytes / r.time_s / 1e9) and r.fraction == pytest.approx(r.gbps * 1e9 / bw)
    assert rows.attrs["meta"]["device_name"] == "MI355X"
    assert hk.bandwidth(kittens_frame(), "MI300X") is None  # no rows for that GPU


def test_without_the_table_nothing():
    assert hk.bandwidth(None) is None


def test_bad_input_names_what_is_accepted():
    with pytest.raises(ValueError, match="hipkittens"):
        hk.bandwidth(pd.DataFrame({"device": ["MI355X"]}))
    with pytest.raises(ValueError, match="kernels"):
        hk.bandwidth(kittens_frame(), kernels=["softmax"])
    with pytest.raises(LookupError):
        hk.bandwidth(kittens_frame(), "no-such-gpu")


@pytest.mark.published
def test_the_published_fused_kernels_beat_eager_pytorch_below_the_datasheet():
    rows = hk.bandwidth(pk.published("hipkittens")).set_index(["op", "library"])
    for op in hk.KERNELS:
        assert rows.loc[(op, "hipkittens"), "gbps"] > rows.loc[(op, "torch_eager"), "gbps"]
    assert (rows["fraction"] < 1).all()
