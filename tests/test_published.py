"""Published third-party measurements: Baidu DeepBench's V100/P100 results in data/published/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit import data
from perfkit.__main__ import main

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = REPO / "data" / "published" / "deepbench"
SOURCE = next((p for p in (REPO.parent / "shared" / "reference" / "published",
                           Path("/work/shared/reference/published")) if p.is_dir()), None)
GPUS = {"v100": ("Tesla V100-SXM2", "V100-SXM2", "2019"), "p100": ("Tesla P100", "P100-PCIe", "2018")}
KINDS = {"gemm": 160, "conv": 94, "rnn": 53}  # rows per GPU and per dtype
REQUIRED = ("experiment", "kind", "description", "device_name", "device", "device_kind", "device_note",
            "published_by", "published_detail", "published_date", "source_repository", "source_commit",
            "source_file", "file_last_changed", "cuda", "cudnn", "licence", "timing", "columns", "rows",
            "complete", "imported_by", "sheets")
DETAIL = {("v100", "gemm"): "cuBLAS 10.1", ("v100", "conv"): "cuDNN 7.6", ("v100", "rnn"): "cuDNN 7.6",
          ("p100", "gemm"): "cuBLAS 8.0", ("p100", "conv"): "cuDNN 6.0", ("p100", "rnn"): "cuDNN 6.0"}


def write_published(root: Path, gpu: str = "v100", kind: str = "gemm", meta: dict | None = None) -> Path:
    folder = root / "published" / "deepbench" / gpu
    folder.mkdir(parents=True, exist_ok=True)
    csv_path = folder / f"{kind}.csv"
    pd.DataFrame({"M": [64], "N": [64], "K": [64], "time_s": [1e-5]}).to_csv(csv_path, index=False)
    if meta is not None:
        csv_path.with_suffix(".json").write_text(json.dumps(meta))
    return csv_path


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_pair_loads_with_its_metadata(gpu, kind):
    df = pk.published(kind, gpu)
    meta = df.attrs["meta"]
    missing = [k for k in REQUIRED if k not in meta]
    assert not missing, f"{gpu}/{kind}.json lacks {missing}"
    name, device, year = GPUS[gpu]
    assert (meta["device_name"], meta["device"], meta["published_date"]) == (name, device, year)
    assert meta["kind"] == kind and meta["experiment"] == f"deepbench_{kind}" and meta["device_kind"] == "gpu"
    assert meta["published_by"] == "Baidu DeepBench" and meta["published_detail"] == DETAIL[gpu, kind]
    assert meta["licence"] == "Apache-2.0" and meta["complete"] is True
    assert meta["source_commit"] == "da81ba7820739e2e506dc27f382d15be5479f98f"
    assert pk.match_driver_name(meta["device_name"]) == device
    assert list(df.columns) == list(meta["columns"]) and meta["rows"] == len(df)
    assert df.groupby("dtype").size().to_dict() == {"float32": KINDS[kind], "float16": KINDS[kind]}
    assert set(df["sheet"]) == set(meta["sheets"])
    assert (df["time_s"] > 0).all() and df["time_s"].notna().all()
    # Rows keep the workbooks' order: the fp32 sheet, then the fp16 sheet, each by spreadsheet row.
    assert df["dtype"].tolist() == sorted(df["dtype"], key=lambda d: d == "float16")
    for _, sheet in df.groupby("sheet"):
        assert sheet["row"].is_monotonic_increasing and sheet["row"].is_unique


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("kind", KINDS)
def test_the_label_says_published_never_recorded(gpu, kind):
    source = pk.source_of(pk.published(kind, gpu))
    assert source.kind == "published"
    label = str(source)
    assert label.startswith("published by Baidu DeepBench, measured on ") and "recorded" not in label


def test_the_v100_gemm_label():
    label = str(pk.source_of(pk.published("gemm", "V100-SXM2")))
    assert label == "published by Baidu DeepBench, measured on Tesla V100-SXM2 (cuBLAS 10.1, 2019)"


@pytest.mark.parametrize("gpu", GPUS)
def test_gemm_tflops_and_run_dimensions(gpu):
    df = pk.published("gemm", gpu)
    expected = 2 * df["M"] * df["N"] * df["K"] / df["time_s"] / 1e12
    np.testing.assert_allclose(df["tflops"], expected, rtol=1e-12)
    assert set(df["layout"]) <= {"NN", "NT", "TN", "TT"}
    for run, sheet in (("M", "M_sheet"), ("N", "N_sheet"), ("K", "K_sheet")):
        assert (df[run] >= df[sheet]).all()
    ran_1536 = df[df["K_sheet"] == 1530]
    assert len(ran_1536) == 16 and (ran_1536["K"] == 1536).all()
    assert ran_1536["note"].str.contains("1536").all()


def test_math_dtype_tensor_cores_on_v100_fp32_math_on_p100():
    for kind in KINDS:
        v100, p100 = pk.published(kind, "v100"), pk.published(kind, "p100")
        assert (v100.loc[v100["dtype"] == "float16", "math_dtype"] == "float16").all()
        assert (p100.loc[p100["dtype"] == "float16", "math_dtype"] == "float32").all()
        for df in (v100, p100):
            assert (df.loc[df["dtype"] == "float32", "math_dtype"] == "float32").all()
    # V100's fp16 GEMMs ran padded to multiples of 8 (M = 35 runs as 40); P100's did not.
    v100 = pk.published("gemm", "v100")
    m35 = v100[v100["M_sheet"] == 35]
    assert (m35["M"] == m35["dtype"].map({"float16": 40, "float32": 35})).all() and len(m35) == 16
    p100 = pk.published("gemm", "p100")
    assert (p100["M"] == p100["M_sheet"]).all()


def test_the_p100_identification_matches_its_numbers():
    """The device note's figures: best fp32 GEMM 9.12 TFLOP/s, 98 % of the PCIe peak, 86 % of the SXM2's."""
    p100 = pk.published("gemm", "p100")
    best = p100.loc[p100["dtype"] == "float32", "tflops"].max() * 1e12
    note = p100.attrs["meta"]["device_note"]
    assert f"{best / 1e12:.2f} TFLOP/s" in note
    assert f"{best / pk.device_spec('P100-PCIe').peak_flops('float32'):.0%}".replace("%", " %") in note
    assert f"{best / pk.device_spec('P100-SXM2').peak_flops('float32'):.0%}".replace("%", " %") in note
    v100 = pk.published("gemm", "v100")
    best_v100 = v100.loc[v100["dtype"] == "float32", "tflops"].max() * 1e12
    assert best_v100 < pk.device_spec("V100-SXM2").peak_flops("float32")  # no Tensor Cores in fp32


def test_the_cut_off_algorithm_names_are_fixed_and_recorded():
    v100 = pk.published("conv", "v100")
    fixes = v100.attrs["meta"]["corrections"]
    assert [(c["row"], c["was"], c["now"]) for c in fixes] == [
        (234, "LICIT_PRECOMP_GEMM", "IMPLICIT_PRECOMP_GEMM"), (236, "LICIT_PRECOMP_GEMM", "IMPLICIT_PRECOMP_GEMM")]
    for c in fixes:
        row = v100[(v100["sheet"] == c["sheet"]) & (v100["row"] == c["row"])]
        assert row["fwd_algo"].tolist() == ["IMPLICIT_PRECOMP_GEMM"]
    for gpu in GPUS:
        algos = set(pk.published("conv", gpu)["fwd_algo"])
        assert algos <= {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
                         "WINOGRAD", "WINOGRAD_NONFUSED"}, algos
    assert pk.published("conv", "p100").attrs["meta"]["corrections"] == []


@pytest.mark.parametrize("gpu", ["v100", "V100", "V100-SXM2", "Tesla V100-SXM2", "NVIDIA V100"])
def test_the_gpu_by_any_of_its_names(gpu):
    assert pk.published("gemm", gpu).attrs["meta"]["device"] == "V100-SXM2"


def test_the_gpu_as_a_device_spec():
    assert pk.published("gemm", pk.device_spec("V100-SXM2")).attrs["meta"]["device_name"] == "Tesla V100-SXM2"
    assert pk.published("rnn", pk.device_spec("P100-PCIe")).attrs["meta"]["device"] == "P100-PCIe"
    with pytest.raises(LookupError, match="gemm on p100"):  # the P100 is modelled as the PCIe card, not SXM2
        pk.published("gemm", pk.device_spec("P100-SXM2"))


def test_published_all_gives_one_frame_per_gpu():
    frames = pk.published_all("conv")
    assert [f.attrs["meta"]["device"] for f in frames] == ["P100-PCIe", "V100-SXM2"]
    assert all(len(f) == 2 * KINDS["conv"] for f in frames)
    with pytest.raises(LookupError, match="conv on v100"):
        pk.published_all("lstm")


def test_bad_input_is_refused():
    with pytest.raises(LookupError, match=r"'gemx'.*published there: .*gemm on v100 by deepbench"):
        pk.published("gemx", "v100")
    with pytest.raises(LookupError, match="gemm on v100"):
        pk.published("gemm", "H100-SXM")
    with pytest.raises(LookupError, match="'nvidia'"):
        pk.published("gemm", "v100", by="nvidia")
    with pytest.raises(TypeError, match="kind"):
        pk.published(3, "v100")
    with pytest.raises(TypeError, match="by"):
        pk.published("gemm", "v100", by=None)
    with pytest.raises(TypeError, match="published_all"):
        pk.published("gemm", None)
    with pytest.raises(ValueError, match="plain name"):
        pk.published("../gemm", "v100")
    with pytest.raises(TypeError, match="kind"):
        pk.published_all(["gemm"])


def test_a_csv_without_its_json_is_not_trusted(tmp_path):
    write_published(tmp_path)
    with pytest.raises(FileNotFoundError, match="data without metadata is not trusted"):
        pk.published("gemm", "v100", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="not trusted"):
        pk.published("gemm", "Tesla V100-SXM2", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="not trusted"):
        pk.published_all("gemm", root=tmp_path)
    assert data.published_recordings(tmp_path).empty


def test_a_json_without_published_by_is_refused(tmp_path):
    meta = {"experiment": "deepbench_gemm", "device_name": "Tesla V100-SXM2", "device": "V100-SXM2", "rows": 1}
    write_published(tmp_path, meta=meta)
    with pytest.raises(ValueError, match="published_by"):
        pk.published("gemm", "V100-SXM2", root=tmp_path)
    assert data.published_recordings(tmp_path).empty
    write_published(tmp_path, meta=dict(meta, published_by="Somebody", published_date="2020"))
    df = pk.published("gemm", "V100-SXM2", root=tmp_path)
    assert df["time_s"].tolist() == [1e-5] and str(pk.source_of(df)).startswith("published by Somebody")


def test_published_recordings_lists_the_six_pairs():
    table = pk.published_recordings()
    assert list(table.columns) == list(data.PUBLISHED_COLUMNS)
    assert list(zip(table["gpu"], table["kind"])) == [(g, k) for g in ("p100", "v100") for k in ("conv", "gemm", "rnn")]
    assert set(table["publisher"]) == {"deepbench"}
    assert table["rows"].tolist() == [2 * KINDS[k] for _ in GPUS for k in ("conv", "gemm", "rnn")]
    assert all(Path(p).is_file() for p in table["path"])


def test_our_recordings_never_include_published_data(tmp_path):
    listed = data.recordings(REPO / "data")
    assert not any("published" in p for p in listed["path"]), listed["path"].tolist()
    # Beside a recording of our own: each function sees only its own kind of data.
    write_published(tmp_path, meta={"device_name": "Tesla V100-SXM2", "published_by": "X", "rows": 1})
    (tmp_path / "published" / "stray.json").write_text(json.dumps({"experiment": "stray", "rows": 0}))
    (tmp_path / "published" / "stray.csv").write_text("n\n")
    ours = tmp_path / "nvidia-h100-80gb-hbm3"
    ours.mkdir()
    pd.DataFrame({"n": [1], "time_s": [1e-6]}).to_csv(ours / "gemm.csv", index=False)
    (ours / "gemm.json").write_text(json.dumps({"experiment": "gemm", "device_name": "NVIDIA H100 80GB HBM3",
                                                "device_kind": "gpu", "complete": True, "rows": 1}))
    assert data.recordings(tmp_path)["experiment"].tolist() == ["gemm"]
    assert data.published_recordings(tmp_path)[["gpu", "kind"]].values.tolist() == [["v100", "gemm"]]
    assert "published" not in data.load("gemm", root=tmp_path).attrs["meta"]


def test_list_prints_the_published_table(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    head, _, table = out.partition(f"published recordings in {REPO / 'data' / 'published'}:")
    assert table, out
    lines = table.strip().splitlines()
    assert lines[0].split() == ["publisher", "gpu", "kind", "rows", "published_date"]
    assert lines[1:] and all(line.split()[0] == "deepbench" for line in lines[1:])
    assert any(line.split() == ["deepbench", "v100", "gemm", "320", "2019"] for line in lines)


def test_list_without_published_data(tmp_path, capsys):
    assert main(["list", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(f"published recordings in {tmp_path / 'published'}:\n  (none)")


@pytest.mark.skipif(SOURCE is None, reason="the DeepBench extracts (../shared/reference/published) are absent")
def test_the_importer_is_deterministic(tmp_path):
    script = REPO / "scripts" / "import_deepbench.py"
    for out in (tmp_path / "a", tmp_path / "b"):
        subprocess.run([sys.executable, str(script), "--src", str(SOURCE), "--out", str(out)], check=True,
                       capture_output=True, timeout=120)
    written = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert [str(p) for p in written] == [f"{g}/{k}.{e}" for g in ("p100", "v100") for k in ("conv", "gemm", "rnn")
                                         for e in ("csv", "json")]
    for rel in written:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
        assert (tmp_path / "a" / rel).read_bytes() == (PUBLISHED / rel).read_bytes(), (
            f"data/published/deepbench/{rel} differs from what the importer writes; rerun it")
