"""Published third-party measurements, read from the published-data folder outside the repository.

Tests that read the real tables skip (saying how to get them) where the folder is absent; on this
project's machines and CI it is ``../shared/reference/published``, so there they run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import perfkit as pk
from perfkit import data
from perfkit.__main__ import main
from perfkit.published_data import CATALOG, HOW_TO_GET, PublishedDataMissing, has_published

from testkit import REPO
GPUS = {"v100": ("Tesla V100-SXM2", "V100-SXM2", "2019"), "p100": ("Tesla P100", "P100-PCIe", "2018")}
KINDS = {"gemm": 160, "conv": 94, "rnn": 53}  # rows per GPU and per dtype
REQUIRED = ("experiment", "kind", "description", "device_name", "device", "device_kind", "device_note",
            "published_by", "published_detail", "published_date", "source_repository", "source_commit",
            "source_file", "file_last_changed", "cuda", "cudnn", "licence", "timing", "columns", "rows",
            "complete", "sheets")
DETAIL = {("v100", "gemm"): "cuBLAS 10.1", ("v100", "conv"): "cuDNN 7.6", ("v100", "rnn"): "cuDNN 7.6",
          ("p100", "gemm"): "cuBLAS 8.0", ("p100", "conv"): "cuDNN 6.0", ("p100", "rnn"): "cuDNN 6.0"}
needs_published = pytest.mark.skipif(not all(has_published(n) for n in CATALOG), reason=HOW_TO_GET)


def _db(kind: str, gpu=None, **kw) -> pd.DataFrame:
    return pk.published(f"deepbench_{kind}", gpu, **kw)


def write_table(root: Path, name: str = "my_table", *, meta: dict | None = None, rows: dict | None = None) -> Path:
    """A small published table ``root/name.csv`` (and its JSON when ``meta`` is given)."""
    root.mkdir(parents=True, exist_ok=True)
    csv_path = root / f"{name}.csv"
    pd.DataFrame(rows or {"source": ["someone/bench/results.csv@abc123"], "gpu": ["NVIDIA H100 80GB HBM3"],
                          "time_s": [1e-5]}).to_csv(csv_path, index=False)
    if meta is not None:
        csv_path.with_suffix(".json").write_text(json.dumps(meta))
    return csv_path


SIDE_META = {"title": "a test table", "publisher": "Somebody", "repository": "https://github.com/someone/bench",
             "commits": ["abc123"], "licence": "MIT", "timing": "CUDA events", "gpu_column": "gpu",
             "gpus": {"NVIDIA H100 80GB HBM3": "H100-SXM"}, "date": "2024"}


@needs_published
@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_pair_loads_with_its_metadata(gpu, kind):
    df = _db(kind, gpu)
    meta = df.attrs["meta"]
    missing = [k for k in REQUIRED if k not in meta]
    assert not missing, f"{gpu}/{kind}.json lacks {missing}"
    name, device, year = GPUS[gpu]
    assert (meta["device_name"], meta["device"], meta["published_date"]) == (name, device, year)
    assert meta["kind"] == kind and meta["experiment"] == f"deepbench_{kind}" and meta["device_kind"] == "gpu"
    assert meta["published_by"] == "Baidu DeepBench" and meta["published_detail"] == DETAIL[gpu, kind]
    assert meta["licence"] == "Apache-2.0" and meta["complete"] is True
    assert meta["source_commit"] == "da81ba7820739e2e506dc27f382d15be5479f98f"
    assert pk.devices.match_driver_name(meta["device_name"]) == device
    assert list(df.columns) == list(meta["columns"]) and meta["rows"] == len(df)
    assert df.groupby("dtype").size().to_dict() == {"float32": KINDS[kind], "float16": KINDS[kind]}
    assert set(df["sheet"]) == set(meta["sheets"])
    assert (df["time_s"] > 0).all() and df["time_s"].notna().all()
    # Rows keep the workbooks' order: the fp32 sheet, then the fp16 sheet, each by spreadsheet row.
    assert df["dtype"].tolist() == sorted(df["dtype"], key=lambda d: d == "float16")
    for _, sheet in df.groupby("sheet"):
        assert sheet["row"].is_monotonic_increasing and sheet["row"].is_unique


@needs_published
@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("kind", KINDS)
def test_the_label_says_published_never_recorded(gpu, kind):
    source = pk.source_of(_db(kind, gpu))
    assert source.kind == "published"
    label = str(source)
    assert label.startswith("published by Baidu DeepBench, measured on ") and "recorded" not in label


@needs_published
def test_the_v100_gemm_label():
    label = str(pk.source_of(_db("gemm", "V100-SXM2")))
    assert label == "published by Baidu DeepBench, measured on Tesla V100-SXM2 (cuBLAS 10.1, 2019)"


@needs_published
@pytest.mark.parametrize("gpu", GPUS)
def test_gemm_tflops_and_run_dimensions(gpu):
    df = _db("gemm", gpu)
    expected = 2 * df["M"] * df["N"] * df["K"] / df["time_s"] / 1e12
    np.testing.assert_allclose(df["tflops"], expected, rtol=1e-12)
    assert set(df["layout"]) <= {"NN", "NT", "TN", "TT"}
    for run, sheet in (("M", "M_sheet"), ("N", "N_sheet"), ("K", "K_sheet")):
        assert (df[run] >= df[sheet]).all()
    ran_1536 = df[df["K_sheet"] == 1530]
    assert len(ran_1536) == 16 and (ran_1536["K"] == 1536).all()
    assert ran_1536["note"].str.contains("1536").all()


@needs_published
def test_math_dtype_tensor_cores_on_v100_fp32_math_on_p100():
    for kind in KINDS:
        v100, p100 = _db(kind, "v100"), _db(kind, "p100")
        assert (v100.loc[v100["dtype"] == "float16", "math_dtype"] == "float16").all()
        assert (p100.loc[p100["dtype"] == "float16", "math_dtype"] == "float32").all()
        for df in (v100, p100):
            assert (df.loc[df["dtype"] == "float32", "math_dtype"] == "float32").all()
    # V100's fp16 GEMMs ran padded to multiples of 8 (M = 35 runs as 40); P100's did not.
    v100 = _db("gemm", "v100")
    m35 = v100[v100["M_sheet"] == 35]
    assert (m35["M"] == m35["dtype"].map({"float16": 40, "float32": 35})).all() and len(m35) == 16
    p100 = _db("gemm", "p100")
    assert (p100["M"] == p100["M_sheet"]).all()


@needs_published
def test_the_p100_identification_matches_its_numbers():
    """The device note's figures: best fp32 GEMM 9.12 TFLOP/s, 98 % of the PCIe peak, 86 % of the SXM2's."""
    p100 = _db("gemm", "p100")
    best = p100.loc[p100["dtype"] == "float32", "tflops"].max() * 1e12
    note = p100.attrs["meta"]["device_note"]
    assert f"{best / 1e12:.2f} TFLOP/s" in note
    assert f"{best / pk.device_spec('P100-PCIe').peak_flop_s('float32'):.0%}".replace("%", " %") in note
    assert f"{best / pk.device_spec('P100-SXM2').peak_flop_s('float32'):.0%}".replace("%", " %") in note
    v100 = _db("gemm", "v100")
    best_v100 = v100.loc[v100["dtype"] == "float32", "tflops"].max() * 1e12
    assert best_v100 < pk.device_spec("V100-SXM2").peak_flop_s("float32")  # no Tensor Cores in fp32


@needs_published
def test_the_cut_off_algorithm_names_are_fixed_and_recorded():
    v100 = _db("conv", "v100")
    fixes = v100.attrs["meta"]["corrections"]
    assert [(c["row"], c["was"], c["now"]) for c in fixes] == [
        (234, "LICIT_PRECOMP_GEMM", "IMPLICIT_PRECOMP_GEMM"), (236, "LICIT_PRECOMP_GEMM", "IMPLICIT_PRECOMP_GEMM")]
    for c in fixes:
        row = v100[(v100["sheet"] == c["sheet"]) & (v100["row"] == c["row"])]
        assert row["fwd_algo"].tolist() == ["IMPLICIT_PRECOMP_GEMM"]
    for gpu in GPUS:
        algos = set(_db("conv", gpu)["fwd_algo"])
        assert algos <= {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
                         "WINOGRAD", "WINOGRAD_NONFUSED"}, algos
    assert _db("conv", "p100").attrs["meta"]["corrections"] == []


@needs_published
@pytest.mark.parametrize("gpu", ["v100", "V100", "V100-SXM2", "Tesla V100-SXM2", "NVIDIA V100"])
def test_the_gpu_by_any_of_its_names(gpu):
    assert _db("gemm", gpu).attrs["meta"]["device"] == "V100-SXM2"


@needs_published
def test_the_gpu_as_a_device_spec():
    assert _db("gemm", pk.device_spec("V100-SXM2")).attrs["meta"]["device_name"] == "Tesla V100-SXM2"
    assert _db("rnn", pk.device_spec("P100-PCIe")).attrs["meta"]["device"] == "P100-PCIe"
    with pytest.raises(LookupError, match=r"no rows for GPU .*P100 \(P100-PCIe\)"):  # the PCIe card, not SXM2
        _db("gemm", pk.device_spec("P100-SXM2"))


@needs_published
def test_published_all_gives_one_frame_per_gpu():
    frames = pk.published_data.published_all("deepbench_conv")
    assert [f.attrs["meta"]["device"] for f in frames] == ["V100-SXM2", "P100-PCIe"]
    assert all(len(f) == 2 * KINDS["conv"] for f in frames)
    both = _db("conv")
    assert len(both) == 4 * KINDS["conv"] and set(both["device"]) == {"V100-SXM2", "P100-PCIe"}
    assert both.attrs["meta"]["device"] is None and both.attrs["meta"]["device_name"] == "V100, P100"
    with pytest.raises(LookupError, match="unknown published source 'lstm'"):
        pk.published_data.published_all("lstm")


@needs_published
@pytest.mark.parametrize("name", CATALOG)
def test_every_catalogued_table_reads_with_its_provenance(name):
    entry = CATALOG[name]
    frame = pk.published(name)
    meta = frame.attrs["meta"]
    assert len(frame) > 0 and meta["rows"] == len(frame) and meta["source_name"] == name
    assert meta["published_by"] == entry.publisher and meta["licence"] == entry.licence
    assert meta["timing"] == entry.timing and meta["source_repository"] == entry.repository
    assert pk.source_of(frame).kind == "published"
    path = Path(meta["path"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256, f"{path} is not the pinned table"
    # perfkit's device names are real table entries, and every GPU of the table has a row
    for device in entry.devices:
        pk.device_spec(device)
        assert len(pk.published(name, device)) > 0
    if "time_s" in frame:
        assert (frame["time_s"].dropna() > 0).all()


@needs_published
def test_one_gpu_of_a_modern_table():
    h100 = pk.published("liger_memory_bound", "H100-SXM")
    assert set(h100["gpu"]) == {"NVIDIA H100 80GB HBM3"} and set(h100["device"]) == {"H100-SXM"}
    label = str(pk.source_of(h100))
    assert label.startswith("published by Liger-Kernel (LinkedIn), measured on NVIDIA H100 80GB HBM3")
    assert "recorded" not in label and "live" not in label
    assert len(pk.published("gpu_benches_stream", "A40")) > 0  # a GPU perfkit has no spec for, by its label
    assert (pk.published("gpu_benches_stream", "A40")["device"] == "").all()
    assert pk.published("deepgemm_fp8", "H800").attrs["meta"]["device"] == "H800"
    with pytest.raises(LookupError, match=r"no rows for GPU 'V100'; its GPUs: H100 \(H100-SXM\)"):
        pk.published("xla_h100_gemm", "V100")


def test_bad_input_is_refused():
    with pytest.raises(LookupError, match=r"unknown published source 'gemx'; known: deepbench_gemm, "):
        pk.published("gemx")
    with pytest.raises(TypeError, match="source must be a published table's name"):
        pk.published(3)
    with pytest.raises(TypeError, match="gpu must be a GPU name"):
        pk.published("deepbench_gemm", 3)
    with pytest.raises(LookupError, match="unknown published source '../gemm'"):
        pk.published("../gemm")
    with pytest.raises(TypeError, match="root must be a folder path"):
        pk.published("deepbench_gemm", root=3)


def test_a_missing_folder_names_the_variable_and_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFKIT_PUBLISHED", str(tmp_path / "nowhere"))
    with pytest.raises(PublishedDataMissing, match=r"\$PERFKIT_PUBLISHED.*perfkit published fetch") as err:
        pk.published("xla_h100_gemm")
    assert isinstance(err.value, LookupError) and str(tmp_path / "nowhere") in str(err.value)
    assert not has_published("xla_h100_gemm")
    table = pk.published_sources()
    assert not table["available"].any() and table["rows"].isna().all() and len(table) == len(CATALOG)
    assert pk.provenance.published_counterparts("gemm_sizes") == {}  # figures draw the model instead
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PublishedDataMissing, match=r"'deepgemm_fp8' \(modern/deepgemm_h800_fp8.csv\) is not in"):
        pk.published("deepgemm_fp8", root=empty)


def test_a_table_without_metadata_is_refused(tmp_path):
    csv_path = write_table(tmp_path)
    with pytest.raises(ValueError, match=f"{csv_path}.*no metadata.*not trusted"):
        pk.published("my_table", root=tmp_path)
    assert "my_table" not in set(pk.published_sources(tmp_path)["source"])
    write_table(tmp_path, meta={k: v for k, v in SIDE_META.items() if k != "licence"})
    with pytest.raises(ValueError, match="lacks licence"):
        pk.published("my_table", root=tmp_path)
    write_table(tmp_path, meta=SIDE_META)
    frame = pk.published("my_table", "H100-SXM", root=tmp_path)
    assert frame["time_s"].tolist() == [1e-5] and frame["device"].tolist() == ["H100-SXM"]
    assert str(pk.source_of(frame)).startswith("published by Somebody, measured on NVIDIA H100 80GB HBM3")
    listed = pk.published_sources(tmp_path).set_index("source")
    assert listed.loc["my_table", "available"] and listed.loc["my_table", "rows"] == 1


def test_a_row_without_source_is_refused(tmp_path):
    rows = {"source": ["someone/bench/results.csv@abc123", ""], "gpu": ["NVIDIA H100 80GB HBM3"] * 2,
            "time_s": [1e-5, 2e-5]}
    csv_path = write_table(tmp_path, meta=SIDE_META, rows=rows)
    with pytest.raises(ValueError, match=f"{csv_path}: 1 rows have no 'source' \\(first at CSV line 3\\)"):
        pk.published("my_table", root=tmp_path)
    rows["source"] = ["someone/bench/results.csv@abc123", "other/repo/x.csv@abc123"]
    write_table(tmp_path, meta=SIDE_META, rows=rows)
    with pytest.raises(ValueError, match="1 rows come from elsewhere than someone/bench/"):
        pk.published("my_table", root=tmp_path)


def test_a_catalogued_table_with_wrong_columns_or_commit_is_refused(tmp_path):
    entry = CATALOG["deepgemm_fp8"]
    (tmp_path / "modern").mkdir()
    path = tmp_path / entry.file
    pd.DataFrame({"gpu": ["H800"], "M": [64]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=f"{path}: not the 'deepgemm_fp8' table perfkit knows: it lacks"):
        pk.published("deepgemm_fp8", root=tmp_path)
    row = {c: [1] for c in entry.columns} | {"gpu": ["H800"], "source": ["deepseek-ai/DeepGEMM/README.md@0000"]}
    pd.DataFrame(row).to_csv(path, index=False)
    with pytest.raises(ValueError, match="come from elsewhere than deepseek-ai/DeepGEMM/"):
        pk.published("deepgemm_fp8", root=tmp_path)
    row["source"] = [f"deepseek-ai/DeepGEMM/README.md@{entry.commits[1]}"]
    pd.DataFrame(row).to_csv(path, index=False)
    assert pk.published("deepgemm_fp8", root=tmp_path)["device"].tolist() == ["H800"]


def test_the_repository_holds_no_published_table():
    """Third-party tables stay outside the repository: nothing under data/ names a published source. Our own
    profiler traces (``data/<slug>/traces/*.json.gz``) are the one other kind of file, each beside its metadata
    (tests/edge/test_recorded_data.py checks that metadata)."""
    shipped = [p for p in (REPO / "data").rglob("*") if p.is_file()]

    def ours(p) -> bool:
        if p.name.endswith(".json.gz"):
            return p.parent.name == "traces" and p.with_name(p.name[:-3]).is_file()
        return p.suffix in {".csv", ".json", ".md"}

    assert [p.name for p in shipped] == ["README.md"] or all(
        ours(p) and "published" not in p.parts for p in shipped), shipped
    listed = data.recordings(REPO / "data")
    assert not any("published" in p for p in listed["path"]), listed["path"].tolist()


@needs_published
def test_list_prints_the_published_tables(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    _, _, table = out.partition("published third-party tables in ")
    lines = table.strip().splitlines()
    assert lines[1].split() == ["source", "devices", "rows", "here", "date", "commit", "licence"]
    gemm = next(line.split() for line in lines if line.split()[:1] == ["deepbench_gemm"])
    assert gemm[1:6] == ["V100-SXM2,", "P100-PCIe", "640", "yes", "2018–2019"]
    assert "missing tables" not in out
    assert main(["published", "list"]) == 0
    out = capsys.readouterr().out
    assert "xla_h100_gemm: XLA's H100 GEMM table" in out and "timing: CUPTI kernel time" in out


def test_list_without_published_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PERFKIT_PUBLISHED", str(tmp_path / "nowhere"))
    assert main(["list", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "published third-party tables (no published-data folder here)" in out
    assert f"missing tables: {HOW_TO_GET}" in out
    assert main(["published", "frobnicate"]) == 2
