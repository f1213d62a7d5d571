"""The recordings committed in data/: physically possible, complete where they say so, and what the
book derives from them (calibrated ceilings, the unaligned-GEMM slowdown, the model's error)."""

import json
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book.gemm import recorded as gemm_recorded
from perfkit.experiments.registry import REGISTRY
from perfkit.calibration.recorded import PROFILE_FILE
from perfkit.data import recordings
from perfkit.validation import half_labels, validation_frames

from testkit import DATA, framed
GPU_RECORDINGS = recordings(DATA)
GPU_RECORDINGS = GPU_RECORDINGS[GPU_RECORDINGS["device_kind"] == "gpu"]
pytestmark = pytest.mark.skipif(GPU_RECORDINGS.empty, reason="no GPU recording in data/")


def _spec(meta: dict) -> pk.DeviceSpec:
    return pk.device_spec(meta["device_name"])


@pytest.mark.parametrize("path", sorted(str(p) for p in GPU_RECORDINGS["path"]))
def test_every_recording_is_physically_possible(path):
    frame = pd.read_csv(path)
    meta = json.loads(Path(path).with_suffix(".json").read_text())
    spec = _spec(meta)
    assert meta["device_kind"] == "gpu" and meta["experiment"] in REGISTRY
    assert list(frame.columns) == list(meta["columns"]), "the CSV holds exactly the declared columns"
    assert meta["rows"] == len(frame)
    assert (frame["time_s"].dropna() > 0).all()
    if "tflops" in frame and "dtype" in frame:
        for dtype, rows in frame.groupby("dtype"):
            assert rows["tflops"].max() * 1e12 <= spec.peaks[str(dtype)], f"{dtype} above the datasheet peak"
    if "gbps" in frame:
        assert frame["gbps"].max() * 1e9 <= spec.mem_bandwidth, "above the datasheet memory bandwidth"


def test_incomplete_recordings_say_why():
    for r in GPU_RECORDINGS[~GPU_RECORDINGS["complete"].astype(bool)].itertuples():
        meta = json.loads(Path(r.path).with_suffix(".json").read_text())
        assert meta["finished_at"] is None and meta["error"], r.experiment


def test_a_committed_profile_calibrates_its_gpu_with_the_recorded_alignment_slowdown():
    profiles = sorted(DATA.glob(f"*/{PROFILE_FILE}"))
    if not profiles:
        pytest.skip("no device profile in data/")
    for path in profiles:
        profile = pk.calibration.load_profile(path)
        spec = pk.calibrated(profile.device["name"])
        assert str(path) in spec.sources["ceilings"]
        ceilings = spec.measured_ceilings
        for dtype, measured in profile.matmul.items():
            assert ceilings.flop_s[dtype] == measured["flop_s"] <= spec.peaks[dtype]
        if (path.parent / "gemm_alignment.json").is_file():
            align = pk.data.load("gemm_alignment", device=path.parent.name, root=DATA)
            assert ceilings.unaligned_slowdown == pk.ceilings.alignment_slowdown(align)
            assert "gemm_alignment" in spec.sources["ceilings"]
            # the model then prices an unaligned GEMM with it, an aligned one without
            dtype = next(d for d, s in ceilings.unaligned_slowdown.items() if s > 1.5)
            k = 4096
            aligned = pk.explain_gemm(4096, 4096, k, dtype, spec)
            unaligned = pk.explain_gemm(4096, 4096, k + 1, dtype, spec)
            assert unaligned.predicted_s > 1.5 * aligned.predicted_s
            assert not unaligned.aligned and aligned.aligned


@pytest.mark.slow  # the model against every recording: seconds
def test_the_model_against_our_recordings():
    frames = validation_frames(DATA)
    table = gemm_recorded.recorded_errors(frames)
    summary = gemm_recorded.recorded_summary(frames)
    if table is None:
        pytest.skip("no GEMM experiment recorded")
    assert set(table.columns) == set(gemm_recorded.RECORDED_ERROR_COLUMNS)
    assert set(table["half"]) <= {"fit", "not fitted"}
    assert set(table.loc[table["half"] == "fit", "experiment"]) <= set(pk.validation.RECORDED_FITS)
    free = table[table["half"] == "not fitted"]
    assert summary["n"] == free["n"].sum()
    assert 0 < summary["median_abs"] <= summary["p90_abs"]
    # the model is better than the plain roofline on every recorded experiment
    assert (free["model median"] < free["roofline median"]).all()


def test_half_labels_mark_the_unaligned_alignment_rows_as_fit():
    rows = {"M": [4096] * 3, "N": [4096] * 3, "K": [4095, 4096, 4097], "dtype": "float16",
            "aligned": [False, True, False], "time_s": [3e-4, 1e-4, 3e-4]}
    assert list(half_labels(framed(rows, experiment="gemm_alignment", device_name="NVIDIA H200"))) == [
        "fit", "not fitted", "fit"]
    assert set(half_labels(framed(rows, experiment="gemm_sizes", device_name="NVIDIA H200"))) == {"not fitted"}


def test_recorded_errors_refuse_what_is_not_frames():
    with pytest.raises(TypeError, match="frames"):
        gemm_recorded.recorded_errors([1, 2])
    with pytest.raises(TypeError, match=r"frames\['x'\]"):
        gemm_recorded.recorded_errors({"x": 3})
    assert gemm_recorded.recorded_errors({}) is None and gemm_recorded.recorded_summary({}) is None


@pytest.mark.slow  # every chapter's verdicts: seconds
def test_the_book_verdicts_rest_on_the_recordings():
    table = pk.book.scorecard.book_table()
    measured = table[table["evidence"] == "measured"]
    assert len(measured) >= len(table) // 2, "most rules are decided by our own recordings"
    assert measured["now_from"].str.match(r"ours, recorded on \S+ on \d{4}-\d{2}-\d{2}$").all()
    assert f"{len(measured)} measured on our GPUs" in pk.book.scorecard.book_summary(table)


def test_the_recorded_timer_agrees_with_do_bench():
    if not pk.data.has_recording("timer_validation"):
        pytest.skip("timer_validation not recorded")
    frame = pk.data.load("timer_validation")
    agree = pk.book.timing.timer_agreement(frame)
    assert agree is not None and agree["n"] >= 2
    assert agree["gap"] < 0.03  # issue 29: within 3 % of triton's do_bench, median over kernels ≥ 10 µs
    assert pk.book.timing.timer_agreement(None) is None
    cpu = frame.assign(triton_do_bench_s=float("nan"))
    assert pk.book.timing.timer_agreement(cpu) is None


OUR_TRACES = sorted(str(p) for p in DATA.glob("*/traces/*.json.gz"))


@pytest.mark.parametrize("path", OUR_TRACES)
def test_our_own_traces_are_small_labelled_and_read_back(path):
    import gzip
    import hashlib

    from perfkit.trace.capture import MAX_TRACE_BYTES, SANITIZED, metadata_path

    raw = Path(path).read_bytes()
    meta = json.loads(metadata_path(path).read_text())
    assert len(raw) == meta["bytes"] <= MAX_TRACE_BYTES
    assert hashlib.sha256(raw).hexdigest() == meta["sha256"]
    assert meta["device_kind"] == "gpu" and meta["device_name"] and meta["torch"] and meta["recorded_at"]
    assert meta["sanitized"] == SANITIZED and "host_name" not in json.loads(gzip.decompress(raw))
    report = pk.diagnose_trace(path, progress=False)
    assert not report.summary.get("cpu_only") and len(report.kernels) > 0 and len(report.ops) > 0
