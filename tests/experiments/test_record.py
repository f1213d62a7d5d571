"""perfkit.experiments.record: streaming rows to CSV, metadata, interruptions, reruns, the repo data/ guard."""

import importlib
import json
import tarfile

import numpy as np
import pandas as pd
import pytest

from perfkit import data
from perfkit.data import device_slug, load
from perfkit.devices import current_device
from perfkit.environment import environment, perfkit_commit
from perfkit.experiments.registry import REGISTRY, register
from perfkit.provenance import source_of
from perfkit.experiments.record import RecordingFailed, archive, record

META_KEYS = {"device_name", "device_kind", "sm_count", "driver", "cuda", "torch", "cupy", "triton", "perfkit",
             "perfkit_commit", "recorded_at", "finished_at", "complete", "experiment", "description", "columns",
             "params", "rows"}
COLUMNS = {"n": "problem size (elements)", "time_s": "duration (s)"}
DAY, COMMIT = "2026-11-22", "1" * 40  # a fixed past UTC day and a made-up commit: nothing depends on today
RECORD = importlib.import_module("perfkit.experiments.record")  # the module (perfkit.experiments.record is also a function)


@pytest.fixture
def fakes():
    """Register fake CPU experiments for one test, and remove them afterwards."""
    names = []

    def add(name, func, needs=()):
        register(name, f"fake experiment {name}", COLUMNS, needs)(func)
        names.append(name)
        return name

    yield add
    for name in names:
        REGISTRY.pop(name, None)


@pytest.fixture
def clock(monkeypatch):
    """Freeze the recorder's clock on DAY and its commit at COMMIT; call it to move either."""
    def at(day=DAY, commit=COMMIT, time="10:00:00"):
        monkeypatch.setattr(RECORD, "_now", lambda: f"{day}T{time}+00:00")
        monkeypatch.setenv("PERFKIT_COMMIT", commit)

    at()
    return at


def files_of(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def slug_dir(out):
    spec = current_device()
    return out / device_slug(spec.driver_name or spec.name)


def meta_of(path):
    return json.loads(path.with_suffix(".json").read_text())


def sweep(n, on_row, fail_at=None, exc=RuntimeError, scale=1.0, check=None):
    rows = []
    for i in range(n):
        if i == fail_at:
            raise exc("boom at row %d" % i)
        row = {"n": i, "time_s": scale * (i + 1) * 1e-3}
        rows.append(row)
        on_row(row)
        if check is not None:
            check(i)
    return pd.DataFrame(rows)


def test_record_writes_csv_and_json(tmp_path, fakes):
    def fake(*, quick=False, progress=True, on_row=None):
        return sweep(2 if quick else 4, on_row)

    name = fakes("_fake_basic", fake)
    paths = record([name], tmp_path, quick=True, progress=False)
    assert paths == [slug_dir(tmp_path) / f"{name}.csv"]
    df = pd.read_csv(paths[0])
    assert df.to_dict("records") == [{"n": 0, "time_s": 1e-3}, {"n": 1, "time_s": 2e-3}]
    meta = meta_of(paths[0])
    assert META_KEYS <= set(meta)
    assert "hostname" not in meta
    spec = current_device()
    assert meta["device_name"] == (spec.driver_name or spec.name)
    assert meta["device_kind"] == spec.kind and meta["sm_count"] == spec.sms
    assert meta["complete"] is True and meta["rows"] == 2 and meta["error"] is None
    assert meta["params"] == {"quick": True}
    assert meta["columns"] == COLUMNS and meta["experiment"] == name
    assert meta["recorded_at"].endswith("+00:00") and meta["finished_at"] >= meta["recorded_at"]
    if spec.kind == "cpu":
        assert meta["driver"] is None
    # load() reads it back with its metadata.
    loaded = load(name, device=spec.driver_name or spec.name, root=tmp_path)
    assert loaded.attrs["meta"] == meta and len(loaded) == 2


def test_rows_reach_the_csv_while_the_experiment_runs(tmp_path, fakes):
    seen = []

    def check(i):  # called right after on_row(row i): the file already holds rows 0..i
        path = slug_dir(tmp_path) / "_fake_stream.csv"
        seen.append(len(pd.read_csv(path)))
        assert meta_of(path)["complete"] is False

    def fake(*, quick=False, progress=True, on_row=None):
        return sweep(3, on_row, check=check)

    fakes("_fake_stream", fake)
    record("_fake_stream", tmp_path, progress=False)
    assert seen == [1, 2, 3]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_interrupted_run_keeps_rows_and_is_incomplete(tmp_path, fakes, exc):
    def fake(*, quick=False, progress=True, on_row=None):
        return sweep(5, on_row, fail_at=3, exc=exc)

    def fine(*, quick=False, progress=True, on_row=None):
        return sweep(1, on_row)

    name = fakes("_fake_fails", fake)
    other = fakes("_fake_fine", fine)
    if exc is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            record([name, other], tmp_path, progress=False)
        assert not (slug_dir(tmp_path) / f"{other}.csv").exists()  # an interrupt stops the run
    else:
        with pytest.raises(RecordingFailed, match="boom at row 3") as info:
            record([name, other], tmp_path, progress=False)
        assert set(info.value.failed) == {name}
        assert meta_of(slug_dir(tmp_path) / f"{other}.csv")["complete"] is True  # the others still ran
    path = slug_dir(tmp_path) / f"{name}.csv"
    assert pd.read_csv(path)["n"].tolist() == [0, 1, 2]
    meta = meta_of(path)
    assert meta["complete"] is False and meta["finished_at"] is None and meta["rows"] == 3
    assert "boom" in meta["error"] or meta["error"] == "KeyboardInterrupt"
    df = load(name, device=path.parent.name, root=tmp_path)
    assert len(df) == 3 and str(source_of(df)).endswith("(incomplete)")


def test_rerun_replaces_a_complete_recording_cleanly(tmp_path, fakes):
    scale = {"value": 1.0}

    def fake(*, quick=False, progress=True, on_row=None):
        return sweep(3 if quick else 4, on_row, scale=scale["value"])

    name = fakes("_fake_rerun", fake)
    [path] = record(name, tmp_path, progress=False)
    first = meta_of(path)
    scale["value"] = 2.0
    record(name, tmp_path, quick=True, progress=False)
    df = pd.read_csv(path)
    assert df["time_s"].tolist() == [2e-3, 4e-3, 6e-3]  # only the new run's rows
    meta = meta_of(path)
    assert meta["complete"] is True and meta["rows"] == 3 and meta["params"] == {"quick": True}
    assert meta["recorded_at"] >= first["recorded_at"]
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{name}.csv", f"{name}.json"]


def test_interrupted_rerun_keeps_the_old_recording(tmp_path, fakes):
    fail = {"at": None}

    def fake(*, quick=False, progress=True, on_row=None):
        return sweep(4, on_row, fail_at=fail["at"], scale=1.0 if fail["at"] is None else 5.0)

    name = fakes("_fake_keep", fake)
    [path] = record(name, tmp_path, progress=False)
    before = path.read_text()
    fail["at"] = 2
    # resume=False: with resume, a complete recording made today at this commit is skipped, not measured
    # again (test_a_complete_recording_of_today_is_skipped); this test is about measuring it again.
    with pytest.raises(RecordingFailed):
        record(name, tmp_path, progress=False, resume=False)
    assert path.read_text() == before and meta_of(path)["complete"] is True
    partial = path.parent / f".{name}.partial.csv"
    assert pd.read_csv(partial)["time_s"].tolist() == [5e-3, 10e-3]  # the interrupted rows, kept aside
    assert json.loads((path.parent / f".{name}.partial.json").read_text())["complete"] is False
    # A later complete run replaces the recording (the hidden leftovers are never read).
    fail["at"] = None
    record(name, tmp_path, progress=False, resume=False)
    assert meta_of(path)["complete"] is True and len(pd.read_csv(path)) == 4
    assert not partial.exists()


def test_resume_passes_skip_to_experiments_that_accept_it(tmp_path, fakes, monkeypatch):
    import importlib

    # A recording resumes only on the day it began: a frozen clock, so a run across midnight (UTC) passes too.
    monkeypatch.setattr(importlib.import_module("perfkit.experiments.record"), "_now", lambda: "2026-11-22T10:00:00+00:00")
    calls = []
    fail = {"at": 2}

    def fake(*, quick=False, progress=True, on_row=None, skip=None):
        done = set() if skip is None else set(skip["n"])
        calls.append(sorted(done))
        rows = []
        for i in range(4):
            if i in done:
                continue
            if i == fail["at"]:
                raise RuntimeError("boom")
            rows.append({"n": i, "time_s": (i + 1) * 1e-3})
            on_row(rows[-1])
        return pd.DataFrame(rows)

    name = fakes("_fake_resume", fake)
    with pytest.raises(RecordingFailed):
        record(name, tmp_path, progress=False)
    first = meta_of(slug_dir(tmp_path) / f"{name}.csv")
    fail["at"] = None
    [path] = record(name, tmp_path, progress=False)
    assert calls == [[], [0, 1]]
    assert pd.read_csv(path)["n"].tolist() == [0, 1, 2, 3]
    meta = meta_of(path)
    assert meta["complete"] is True and meta["rows"] == 4
    assert meta["recorded_at"] == first["recorded_at"] and len(meta["resumed_at"]) == 1
    # resume=False measures everything again (the call said so in its comment but passed neither
    # resume=False nor other params; with resume, this complete same-day recording is now skipped).
    fail["at"] = 1
    with pytest.raises(RecordingFailed):
        record(name, tmp_path, progress=False, resume=False)  # the complete recording is kept, not resumed
    assert calls[-1] == []
    assert len(pd.read_csv(path)) == 4
    # Other params (quick) measure everything again too.
    with pytest.raises(RecordingFailed):
        record(name, tmp_path, quick=True, progress=False)
    assert calls[-1] == [] and len(calls) == 4
    assert len(pd.read_csv(path)) == 4 and meta_of(path)["params"] == {"quick": False}


def test_no_resume_when_the_declared_columns_changed(tmp_path, fakes):
    calls = []
    fail = {"at": 2}

    def fake(*, quick=False, progress=True, on_row=None, skip=None):
        calls.append(skip is not None)
        return sweep(4, on_row, fail_at=fail["at"])

    name = fakes("_fake_columns", fake)
    with pytest.raises(RecordingFailed):
        record(name, tmp_path, progress=False)
    json_path = slug_dir(tmp_path) / f"{name}.json"
    old = json.loads(json_path.read_text())
    old["columns"] = dict(reversed(list(old["columns"].items())))  # recorded under another declaration
    json_path.write_text(json.dumps(old))
    fail["at"] = None
    [path] = record(name, tmp_path, progress=False)
    assert calls == [False, False] and "resumed_at" not in meta_of(path)
    assert pd.read_csv(path)["n"].tolist() == [0, 1, 2, 3]


def test_no_resume_without_skip_parameter(tmp_path, fakes):
    fail = {"at": 2}

    def fake(*, quick=False, progress=True, on_row=None):
        return sweep(4, on_row, fail_at=fail["at"])

    name = fakes("_fake_noskip", fake)
    with pytest.raises(RecordingFailed):
        record(name, tmp_path, progress=False)
    fail["at"] = None
    [path] = record(name, tmp_path, progress=False)
    assert pd.read_csv(path)["n"].tolist() == [0, 1, 2, 3]
    assert "resumed_at" not in meta_of(path)


def test_refuses_cpu_recording_into_repo_data(fakes):
    if current_device().kind == "gpu":
        pytest.skip("this machine has a GPU: recording into data/ is allowed")
    name = fakes("_fake_guard", lambda **kw: sweep(1, kw["on_row"]))
    repo_data = data.repo_data_dir()
    existed = repo_data.exists() and sorted(repo_data.rglob("*"))
    for out in (repo_data, repo_data / "sub", str(repo_data / ".." / "data")):
        with pytest.raises(ValueError, match="real GPU"):
            record(name, out, progress=False)
    assert (repo_data.exists() and sorted(repo_data.rglob("*"))) == existed  # nothing written


def test_skips_experiments_whose_needs_are_unmet(tmp_path, fakes, capsys):
    if current_device().kind == "gpu":
        pytest.skip("this machine has a GPU")
    name = fakes("_fake_needs_cuda", lambda **kw: sweep(1, kw["on_row"]), needs=("cuda",))
    assert record(name, tmp_path, progress=False) == []
    assert "skipped, this machine lacks a CUDA GPU" in capsys.readouterr().out
    assert not slug_dir(tmp_path).exists()


def test_bad_arguments(tmp_path):
    with pytest.raises(LookupError, match="unknown experiment 'no_such_experiment'; registered"):
        record("no_such_experiment", tmp_path)
    with pytest.raises(TypeError, match="out"):
        record([], 3)
    with pytest.raises(TypeError, match="quick"):
        record([], tmp_path, quick="yes")


def test_rows_with_numpy_scalars_are_plain_numbers(tmp_path, fakes):
    def fake(*, quick=False, progress=True, on_row=None):
        rows = [{"n": np.int64(1), "time_s": np.float64(0.1)}, {"time_s": np.float32(0.25), "n": np.int64(2)}]
        for row in rows:
            on_row(row)
        return pd.DataFrame(rows)

    name = fakes("_fake_numpy", fake)
    [path] = record(name, tmp_path, progress=False)
    assert path.read_text().splitlines() == ["n,time_s", "1,0.1", "2,0.25"]  # declared order, plain numbers


def test_csv_header_is_the_declared_columns_before_any_row(tmp_path, fakes):
    seen = []

    def fake(*, quick=False, progress=True, on_row=None):
        seen.append((slug_dir(tmp_path) / "_fake_header.csv").read_text())
        return sweep(1, on_row)

    record(fakes("_fake_header", fake), tmp_path, progress=False)
    assert seen == ["n,time_s\n"]


@pytest.mark.parametrize("bad, match", [
    ("undeclared", r"columns the experiment does not declare: \['dtype'\]"),
    ("unstreamed", "returned 2 rows but handed 1 to on_row"),
    ("not_a_frame", "returned NoneType, not a pandas DataFrame"),
])
def test_drifting_experiments_fail_their_recording(tmp_path, fakes, bad, match):
    def fake(*, quick=False, progress=True, on_row=None):
        on_row({"n": 0, "time_s": 1e-3})
        if bad == "undeclared":
            on_row({"n": 1, "time_s": 2e-3, "dtype": "float16"})
        if bad == "not_a_frame":
            return None
        return pd.DataFrame({"n": [0, 1], "time_s": [1e-3, 2e-3]})

    name = fakes(f"_fake_{bad}", fake)
    with pytest.raises(RecordingFailed, match=match):
        record(name, tmp_path, progress=False)
    meta = meta_of(slug_dir(tmp_path) / f"{name}.csv")
    assert meta["complete"] is False and meta["rows"] == 1


def test_archive_packs_one_file(tmp_path, fakes):
    name = fakes("_fake_archive", lambda **kw: sweep(2, kw["on_row"]))
    out = tmp_path / "data"
    record(name, out, progress=False)
    (slug_dir(out) / ".leftover.partial.csv").write_text("x\n")
    tar_path = archive(out, tmp_path / "recording.tar.gz")
    with tarfile.open(tar_path) as tar:
        names = sorted(tar.getnames())
    slug = slug_dir(out).name
    assert names == ["data", f"data/{slug}", f"data/{slug}/{name}.csv", f"data/{slug}/{name}.json"]
    with pytest.raises(ValueError, match=".tar.gz"):
        archive(out, tmp_path / "recording.zip")
    with pytest.raises(FileNotFoundError):
        archive(tmp_path / "nothing", tmp_path / "x.tar.gz")


def test_environment_versions():
    env = environment()
    import perfkit
    import torch

    assert env["torch"] == torch.__version__ and env["cuda"] == torch.version.cuda
    assert env["perfkit"] == perfkit.__version__
    commit = perfkit_commit()
    assert commit is None or (len(commit.removesuffix("-dirty")) == 40)


def test_commit_can_be_given_by_the_environment(monkeypatch):
    monkeypatch.setenv("PERFKIT_COMMIT", "0123abc")
    assert perfkit_commit() == "0123abc"


def test_a_complete_recording_of_today_is_skipped(tmp_path, fakes, clock, capsys):
    calls = []

    def fake(*, quick=False, progress=True, on_row=None):
        calls.append(quick)
        return sweep(3, on_row)

    name = fakes("_fake_today", fake)
    out = tmp_path / "data"
    [path] = record(name, out, progress=False)
    before = files_of(path.parent)
    capsys.readouterr()
    clock(time="23:59:00")  # later the same (UTC) day, same commit
    assert record(name, out, progress=False) == [path]  # its existing files are its recording
    assert calls == [False]  # not measured again
    assert files_of(path.parent) == before  # byte for byte, metadata included
    printed = capsys.readouterr().out
    assert (f"[1/1] {name}: already recorded today at this commit (complete, 3 rows): skipped; "
            "--no-resume measures it again") in printed
    assert "recorded 0 of 1 experiment(s)" in printed and "1 already recorded today (skipped)" in printed
    with tarfile.open(archive(out, tmp_path / "recording.tar.gz")) as tar:
        assert f"data/{path.parent.name}/{name}.csv" in tar.getnames()
        assert f"data/{path.parent.name}/{name}.json" in tar.getnames()


def test_no_resume_measures_a_complete_recording_of_today_again(tmp_path, fakes, clock):
    calls = []

    def fake(*, quick=False, progress=True, on_row=None):
        calls.append(quick)
        return sweep(3, on_row, scale=float(len(calls)))

    name = fakes("_fake_again", fake)
    [path] = record(name, tmp_path, progress=False)
    clock(time="11:00:00")
    assert record(name, tmp_path, progress=False, resume=False) == [path]
    assert calls == [False, False]
    assert pd.read_csv(path)["time_s"].tolist() == [2e-3, 4e-3, 6e-3]  # the second run's rows
    meta = meta_of(path)
    assert meta["recorded_at"] == f"{DAY}T11:00:00+00:00" and meta["complete"] is True and "resumed_at" not in meta
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{name}.csv", f"{name}.json"]


@pytest.mark.parametrize("change", ["day", "commit", "unknown commit", "rows"])
def test_a_complete_recording_not_of_this_run_is_measured_again(tmp_path, fakes, clock, monkeypatch, change):
    calls = []

    def fake(*, quick=False, progress=True, on_row=None):
        calls.append(quick)
        return sweep(3, on_row, scale=float(len(calls)))

    if change == "unknown commit":  # a tree without .git and no PERFKIT_COMMIT: nothing shows it is the same code
        monkeypatch.setattr(RECORD, "environment", lambda: {**environment(), "perfkit_commit": None})
    name = fakes("_fake_other_" + change.replace(" ", "_"), fake)
    [path] = record(name, tmp_path, progress=False)
    if change == "day":
        clock(day="2026-11-23", time="00:00:01")
    elif change == "commit":
        clock(commit="2" * 40)
    elif change == "rows":  # the CSV lost its last row: it no longer holds what its JSON counts
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    assert record(name, tmp_path, progress=False) == [path]
    assert calls == [False, False]
    assert pd.read_csv(path)["time_s"].tolist() == [2e-3, 4e-3, 6e-3]
    meta = meta_of(path)
    assert meta["complete"] is True and meta["rows"] == 3
    assert meta["recorded_at"][:10] == ("2026-11-23" if change == "day" else DAY)
    assert meta["perfkit_commit"] == {"commit": "2" * 40, "unknown commit": None}.get(change, COMMIT)


def test_a_rerun_after_an_interrupt_measures_only_the_rest(tmp_path, fakes, clock, capsys):
    calls = {"a": [], "b": [], "c": []}
    stop = {"at": 2}

    def a(*, quick=False, progress=True, on_row=None):
        calls["a"].append(None)
        return sweep(2, on_row)

    def b(*, quick=False, progress=True, on_row=None, skip=None):
        done = [] if skip is None else skip["n"].tolist()
        calls["b"].append(done)
        rows = []
        for i in range(4):
            if i in done:
                continue
            if i == stop["at"]:
                raise KeyboardInterrupt  # what SIGINT at the time budget does
            rows.append({"n": i, "time_s": (i + 1) * 1e-3})
            on_row(rows[-1])
        return pd.DataFrame(rows)

    def c(*, quick=False, progress=True, on_row=None):
        calls["c"].append(None)
        return sweep(1, on_row)

    names = [fakes("_fake_run_a", a), fakes("_fake_run_b", b), fakes("_fake_run_c", c)]
    with pytest.raises(KeyboardInterrupt):
        record(names, tmp_path, progress=False)
    assert {k: len(v) for k, v in calls.items()} == {"a": 1, "b": 1, "c": 0}
    a_files = {p: p.read_bytes() for p in slug_dir(tmp_path).glob(f"{names[0]}.*")}
    capsys.readouterr()
    stop["at"] = None
    clock(time="10:08:00")
    paths = record(names, tmp_path, progress=False)
    assert paths == [slug_dir(tmp_path) / f"{n}.csv" for n in names]
    assert {k: len(v) for k, v in calls.items()} == {"a": 1, "b": 2, "c": 1}  # a skipped, b resumed, c measured
    assert calls["b"][-1] == [0, 1]
    assert {p: p.read_bytes() for p in a_files} == a_files
    assert [meta_of(p)["complete"] for p in paths] == [True, True, True]
    assert pd.read_csv(paths[1])["n"].tolist() == [0, 1, 2, 3]
    printed = capsys.readouterr().out
    assert f"[1/3] {names[0]}: already recorded today" in printed and "recorded 2 of 3 experiment(s)" in printed
    # A failure in a later run still lists the skipped recordings among the complete ones.
    bad = fakes("_fake_run_bad", lambda **kw: sweep(3, kw["on_row"], fail_at=1))
    with pytest.raises(RecordingFailed) as info:
        record([*names, bad], tmp_path, progress=False)
    assert info.value.paths == paths and set(info.value.failed) == {bad}
    assert {k: len(v) for k, v in calls.items()} == {"a": 1, "b": 2, "c": 1}
