"""The command line (python -m perfkit) and scripts/run_chapters.py."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from perfkit import data
from perfkit.__main__ import main
from perfkit.devices import current_device
from perfkit.experiments.registry import REGISTRY, register

from testkit import REPO
COLUMNS = {"n": "problem size (elements)", "time_s": "duration (s)"}


def _fake(*, quick=False, progress=True, on_row=None):
    rows = []
    for i in range(2 if quick else 3):
        rows.append({"n": i, "time_s": (i + 1) * 1e-3})
        on_row(rows[-1])
    return pd.DataFrame(rows)


def _failing(*, quick=False, progress=True, on_row=None):
    on_row({"n": 0, "time_s": 1e-3})
    raise RuntimeError("kaput")


@pytest.fixture
def fake_experiments():
    register("_cli_fake", "a fake CLI experiment\nsecond line", COLUMNS)(_fake)
    register("_cli_failing", "a fake experiment that fails", COLUMNS, needs=())(_failing)
    yield "_cli_fake", "_cli_failing"
    REGISTRY.pop("_cli_fake", None)
    REGISTRY.pop("_cli_failing", None)


def slug():
    spec = current_device()
    return data.device_slug(spec.driver_name or spec.name)


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert current_device().describe().splitlines()[0] in out
    for word in ("CUDA available", "torch", "triton", "cupy", "perfkit commit", "torch.version.cuda"):
        assert word in out


@pytest.mark.slow  # spawns a process
def test_info_as_a_module():
    r = subprocess.run([sys.executable, "-m", "perfkit", "info"], cwd=REPO, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stderr
    assert "CUDA available" in r.stdout


def test_list(tmp_path, fake_experiments, capsys):
    assert main(["record", "_cli_fake", "--out", str(tmp_path), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["list", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "_cli_fake" in l and "needs" in l)
    assert "a fake CLI experiment" in line and "second line" not in out
    assert slug() in out and str(tmp_path) in out


def test_record_quick_with_archive(tmp_path, fake_experiments, capsys):
    out, tar_path = tmp_path / "data", tmp_path / "recording.tar.gz"
    rc = main(["record", "_cli_fake", "--out", str(out), "--quick", "--archive", str(tar_path), "--no-progress"])
    assert rc == 0
    csv_path = out / slug() / "_cli_fake.csv"
    assert len(pd.read_csv(csv_path)) == 2
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    assert meta["params"] == {"quick": True} and meta["complete"] is True
    with tarfile.open(tar_path) as tar:
        assert f"data/{slug()}/_cli_fake.json" in tar.getnames()
    assert "_cli_fake: 2 rows" in capsys.readouterr().out


def test_record_failure_exits_1_and_still_archives(tmp_path, fake_experiments, capsys):
    out, tar_path = tmp_path / "data", tmp_path / "r.tar.gz"
    rc = main(["record", "_cli_failing", "_cli_fake", "--out", str(out), "--archive", str(tar_path),
               "--no-progress"])
    assert rc == 1
    assert "kaput" in capsys.readouterr().err
    assert tar_path.is_file()
    meta = json.loads((out / slug() / "_cli_failing.json").read_text())
    assert meta["complete"] is False and "kaput" in meta["error"]


def test_unknown_experiment_exits_2(tmp_path, fake_experiments, capsys):
    assert main(["record", "no_such_thing", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no_such_thing" in err and "_cli_fake" in err and "gemm_sizes" in err and "decode_steps" in err
    assert not any(tmp_path.iterdir())


def test_bad_usage_exits_2(capsys):
    assert main([]) == 2
    assert main(["frobnicate"]) == 2


def test_cpu_recording_into_repo_data_exits_2(fake_experiments, capsys):
    if current_device().kind == "gpu":
        pytest.skip("this machine has a GPU")
    assert main(["record", "_cli_fake", "--out", str(data.repo_data_dir()), "--no-progress"]) == 2
    assert "real GPU" in capsys.readouterr().err


CHAPTER = '''---
jupytext:
  text_representation:
    format_name: myst
---

# A tiny chapter

```{code-cell} ipython3
:tags: [remove-cell]

import sys
if "google.colab" in sys.modules:
    %pip install -q perfkit
x = 20
```

Some text.

```{code-cell} ipython3
---
tags: [hide-input]
---
%matplotlib inline
!echo this is a shell escape
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [x, x + 1, x + 2])
assert x + 22 == 42
display("displayed")
x * 2
```

````{code-cell} ipython3
import matplotlib
from matplotlib.figure import Figure
assert matplotlib.get_backend().lower() == "agg"
f = Figure()
f.add_subplot().plot([0, 1])
f
````
'''


def test_code_cells_parsing():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import run_chapters
    finally:
        sys.path.remove(str(REPO / "scripts"))
    cells = run_chapters.code_cells(CHAPTER)
    assert len(cells) == 3
    assert cells[0].startswith("\nimport sys") or cells[0].startswith("import sys")
    assert ":tags:" not in cells[0] and "%pip" not in cells[0] and "pass" in cells[0]
    assert "tags" not in cells[1] and "---" not in cells[1]
    assert "%matplotlib" not in cells[1] and "!echo" not in cells[1]
    compile(cells[0], "cell", "exec")  # the magic inside `if` became `pass`: still valid Python


@pytest.mark.slow  # spawns processes
def test_run_chapters_script(tmp_path):
    chapter = tmp_path / "chapters" / "01_tiny.md"
    chapter.parent.mkdir()
    chapter.write_text(CHAPTER)
    broken = tmp_path / "chapters" / "02_broken.md"
    broken.write_text("# Broken\n\n```{code-cell} ipython3\nraise ValueError('nope')\n```\n")
    figures = tmp_path / "figures"
    script = str(REPO / "scripts" / "run_chapters.py")
    r = subprocess.run([sys.executable, script, str(chapter), "--out", str(figures)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "01_tiny.md: pass" in r.stdout and "displayed" in r.stdout and "40" in r.stdout
    assert sorted(p.name for p in figures.iterdir()) == ["01_tiny-01.png", "01_tiny-02.png"]
    r = subprocess.run([sys.executable, script, str(chapter), str(broken)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1
    assert "02_broken.md: FAIL" in r.stdout and "1 passed, 1 failed" in r.stdout
    assert "ValueError: nope" in r.stderr
