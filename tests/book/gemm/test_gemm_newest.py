"""perfkit.book.gemm.newest: the best GEMM of the newest GPUs (ml-engineering's MAMF table) against
their datasheets. Small synthetic tables check what each function computes; the tests marked
``published`` read the real table (skipped, saying how to get it, where it is absent)."""

from __future__ import annotations

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.gemm import newest
from testkit import framed

MAMF_META = {"published_by": "ml-engineering (Stas Bekman)", "published_date": "2025",
             "device_name": "NVIDIA B200 SXM, AMD MI300X, Intel Gaudi 3", "timing": "best of many shapes, the mean",
             "caveat": "A max over many noisy means is optimistic. A100 rows are withheld."}


def mamf_frame() -> pd.DataFrame:
    """A MAMF-like table: B200 in BF16 and FP8, MI300X in BF16 and FP8 without a value, a Gaudi."""
    rows = [("B200", "NVIDIA B200 SXM", "bfloat16", 1800.0, 1792, 16128, 3072),
            ("B200", "NVIDIA B200 SXM", "float8_e4m3fn", 3000.0, 4096, 4096, 4096),
            ("MI300X", "AMD MI300X", "bfloat16", 650.0, 10240, 15360, 8192),
            ("MI300X", "AMD MI300X", "float8_e4m3fn", None, 1, 1, 1),
            ("", "Intel Gaudi 3", "bfloat16", 1200.0, 16384, 4096, 768)]
    return framed([{"source": "stas00/ml-engineering/README.md@744d01e1", "device": d, "gpu": g, "dtype": t,
                    "tflops_best": v, "M": M, "N": N, "K": K, "notes": ""} for d, g, t, v, M, N, K in rows],
                  MAMF_META)


def test_mamf_rows_keep_the_gpus_asked_for_with_the_datasheet_share():
    rows = newest.mamf_rows(mamf_frame(), ["MI300X", "B200"])
    assert list(zip(rows["device"], rows["dtype"])) == [("MI300X", "bfloat16"), ("B200", "bfloat16"),
                                                        ("B200", "float8")]  # the FP8 MI300X row has no value
    for r in rows.itertuples():
        peak = pk.device_spec(r.device).peak_flop_s(r.dtype) / 1e12
        assert r.peak_tflops == pytest.approx(peak) and r.fraction == pytest.approx(r.tflops_best / peak)
    assert rows.attrs["meta"]["device_name"] == "MI300X, B200"  # narrowed to what is shown
    assert rows.attrs["meta"]["published_by"] == MAMF_META["published_by"]
    only_bf16 = newest.mamf_rows(mamf_frame(), dtypes=["bf16"])
    assert set(only_bf16["dtype"]) == {"bfloat16"} and set(only_bf16["device"]) == {"B200", "MI300X"}


def test_bad_input_names_what_is_accepted():
    with pytest.raises(ValueError, match="mamf_newest"):
        newest.mamf_rows(pd.DataFrame({"device": ["B200"]}))
    with pytest.raises(TypeError, match="gpus"):
        newest.mamf_rows(mamf_frame(), "B200")
    with pytest.raises(LookupError):
        newest.mamf_rows(mamf_frame(), ["no-such-gpu"])
    with pytest.raises(TypeError, match="frame"):
        newest.mamf_rows([1, 2])


@pytest.mark.published
def test_the_published_table_blackwell_nearer_its_datasheet_than_amd():
    mamf = pk.published("mamf_newest")
    rows = newest.mamf_rows(mamf)
    assert set(rows["device"]) == set(newest.MAMF_GPUS)
    assert (rows["fraction"] < 1).all()  # no kernel above its datasheet
    share = rows[rows["dtype"] == "bfloat16"].set_index("device")["fraction"]
    assert min(share["B200"], share["GB200"]) > max(share["MI300X"], share["MI355X"])
    table = mamf[mamf["device"].isin(newest.MAMF_GPUS) & mamf["tflops_best"].notna()]
    assert len(rows) == len(table)

