"""perfkit.data: the data/ layout, loading recordings with their metadata, figure labels."""

import json
from pathlib import Path

import pandas as pd
import pytest

from perfkit import data
from perfkit.data import device_slug, has_recording, load, read_meta, recordings
from testkit import H100_NAME


def write_recording(root: Path, device_name: str, experiment: str, rows: list[dict], *, kind="gpu",
                    recorded_at="2026-11-20T10:00:00+00:00", complete=True, meta_file=True) -> Path:
    folder = root / device_slug(device_name)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path = folder / f"{experiment}.csv"
    pd.DataFrame(rows).to_csv(csv_path, index=False)
    if meta_file:
        meta = {"experiment": experiment, "device_name": device_name, "device_kind": kind,
                "recorded_at": recorded_at, "finished_at": recorded_at if complete else None,
                "complete": complete, "rows": len(rows), "params": {"quick": False},
                "columns": {"n": "size (elements)", "time_s": "duration (s)"}}
        csv_path.with_suffix(".json").write_text(json.dumps(meta))
    return csv_path


ROWS = [{"n": 1, "time_s": 1.5e-6}, {"n": 2, "time_s": 2.25e-6}]


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
    ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb"),
    ("CPU (x86_64, 16 cores)", "cpu-x86-64-16-cores"),
    ("  Tesla T4 ", "tesla-t4"),
    ("nvidia-h100-80gb-hbm3", "nvidia-h100-80gb-hbm3"),
])
def test_device_slug(name, slug):
    assert device_slug(name) == slug


def test_device_slug_refuses_bad_names():
    with pytest.raises(TypeError, match="name"):
        device_slug(None)
    with pytest.raises(ValueError, match="letter or digit"):
        device_slug(" -- ")


def test_load_round_trip_with_meta(tmp_path):
    write_recording(tmp_path, H100_NAME, "gemm_sizes", ROWS)
    df = load("gemm_sizes", device="nvidia-h100-80gb-hbm3", root=tmp_path)
    assert list(df.columns) == ["n", "time_s"]
    assert df["time_s"].tolist() == [1.5e-6, 2.25e-6]  # full float precision survives
    meta = df.attrs["meta"]
    assert meta["device_name"] == H100_NAME and meta["complete"] is True
    # The same recording by driver name, by perfkit table name, and with device=None (the GPU one).
    for device in (H100_NAME, "H100-SXM", None):
        assert load("gemm_sizes", device=device, root=tmp_path).attrs["meta"]["device_name"] == H100_NAME
    assert has_recording("gemm_sizes", root=tmp_path)
    assert has_recording("gemm_sizes", device="H100-SXM", root=tmp_path)
    assert not has_recording("gemm_sizes", device="A100-SXM4-80GB", root=tmp_path)
    assert not has_recording("waves", root=tmp_path)


def test_device_none_picks_a_gpu_recording_complete_then_most_recent(tmp_path):
    write_recording(tmp_path, "CPU (x86_64, 2 cores)", "waves", ROWS, kind="cpu",
                    recorded_at="2026-11-22T00:00:00+00:00")
    write_recording(tmp_path, "NVIDIA A100-SXM4-80GB", "waves", ROWS, recorded_at="2026-11-01T00:00:00+00:00")
    write_recording(tmp_path, H100_NAME, "waves", ROWS, recorded_at="2026-11-10T00:00:00+00:00")
    assert load("waves", root=tmp_path).attrs["meta"]["device_name"] == H100_NAME
    write_recording(tmp_path, H100_NAME, "waves", ROWS[:1], recorded_at="2026-11-21T00:00:00+00:00", complete=False)
    assert load("waves", root=tmp_path).attrs["meta"]["device_name"] == "NVIDIA A100-SXM4-80GB"
    # Only CPU recordings: device=None finds no GPU recording; naming the CPU works.
    write_recording(tmp_path, "CPU (x86_64, 2 cores)", "cpu_only", ROWS, kind="cpu")
    with pytest.raises(LookupError, match="no GPU recording"):
        load("cpu_only", root=tmp_path)
    assert len(load("cpu_only", device="cpu-x86-64-2-cores", root=tmp_path)) == 2


def test_lookup_error_lists_what_exists(tmp_path):
    with pytest.raises(LookupError, match="recordings there: none"):
        load("gemm_sizes", root=tmp_path)
    write_recording(tmp_path, H100_NAME, "waves", ROWS)
    with pytest.raises(LookupError, match="waves on nvidia-h100-80gb-hbm3"):
        load("gemm_sizes", root=tmp_path)
    with pytest.raises(LookupError, match="device 'T4'"):
        load("waves", device="T4", root=tmp_path)
    with pytest.raises(TypeError, match="experiment"):
        load(3, root=tmp_path)


def test_csv_without_json_is_not_trusted(tmp_path):
    write_recording(tmp_path, H100_NAME, "gemm_sizes", ROWS, meta_file=False)
    with pytest.raises(FileNotFoundError, match="not trusted"):
        load("gemm_sizes", root=tmp_path)
    assert not has_recording("gemm_sizes", root=tmp_path)
    assert len(recordings(tmp_path)) == 0


def test_perfkit_data_env_override(tmp_path, monkeypatch):
    write_recording(tmp_path, H100_NAME, "gemm_sizes", ROWS)
    monkeypatch.setenv("PERFKIT_DATA", str(tmp_path))
    assert data.data_root() == tmp_path
    assert load("gemm_sizes").attrs["meta"]["device_name"] == H100_NAME
    monkeypatch.delenv("PERFKIT_DATA")
    assert data.data_root() == data.repo_data_dir()
    assert data.repo_data_dir() == Path(data.__file__).resolve().parent.parent / "data"


def test_recordings_table_and_hidden_files(tmp_path):
    write_recording(tmp_path, H100_NAME, "waves", ROWS)
    write_recording(tmp_path, H100_NAME, "gemm_sizes", ROWS[:1], complete=False)
    (tmp_path / device_slug(H100_NAME) / ".waves.partial.json").write_text("{}")  # an interrupted rerun
    (tmp_path / device_slug(H100_NAME) / ".waves.partial.csv").write_text("n\n")
    table = recordings(tmp_path)
    assert list(table.columns) == list(data.RECORDING_COLUMNS)
    assert table["experiment"].tolist() == ["gemm_sizes", "waves"]
    assert table["complete"].tolist() == [False, True]
    assert table["rows"].tolist() == [1, 2]
    assert set(table["device_slug"]) == {"nvidia-h100-80gb-hbm3"}
    assert len(recordings(tmp_path / "missing")) == 0


def test_loaded_frame_carries_its_metadata_for_the_label(tmp_path):
    path = write_recording(tmp_path, H100_NAME, "waves", ROWS, recorded_at="2026-11-20T10:00:00+00:00")
    df = load("waves", root=tmp_path)
    assert df.attrs["meta"] == read_meta(path.with_suffix(".json"))
    from perfkit.provenance import source_of

    assert str(source_of(df)) == "recorded on NVIDIA H100 80GB HBM3 on 2026-11-20"


def test_read_meta_refuses_what_is_not_a_json_object(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        read_meta(bad)
    bad.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_meta(bad)


def test_empty_recording_loads_as_empty_frame(tmp_path):
    path = write_recording(tmp_path, H100_NAME, "waves", [], complete=False)
    path.write_text("")  # interrupted before the first row
    df = load("waves", root=tmp_path)
    assert len(df) == 0 and list(df.columns) == ["n", "time_s"]
