"""``scripts/gpu_run.sh`` as a short GPU loan runs it: its steps, its arguments and the loan's plan
(``--dry-run`` runs nothing), and ``scripts/plan_loan.py``, which holds the plan to its budget."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from perfkit.experiments import registry
from testkit import REPO

SCRIPT = REPO / "scripts" / "gpu_run.sh"
STEPS = ["calibrate", "kernels", "record", "traces", "tests", "bench", "chapters", "labs"]


def gpu_run(*args: str, out) -> subprocess.CompletedProcess:
    env = dict(os.environ, OUT=str(out), PERFKIT_RECORD_DIR=str(out.parent / "record_dir"))
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, env=env)


def planned(proc: subprocess.CompletedProcess) -> list[str]:
    """The steps a dry run lists, in order."""
    return [line.split()[0] for line in proc.stdout.splitlines()[1:] if line.startswith("  ")]


def loan_experiments() -> list[str]:
    spec = importlib.util.spec_from_file_location("plan_loan", REPO / "scripts" / "plan_loan.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.loan_experiments()


def test_a_dry_run_lists_every_step_in_order_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    proc = gpu_run("--dry-run", out=out)
    assert proc.returncode == 0, proc.stderr
    assert planned(proc) == STEPS
    assert not out.exists() and not (tmp_path / "record_dir").exists()


def test_every_step_has_a_block_in_the_script():
    text = SCRIPT.read_text()
    assert re.search(r"^STEPS=\((.*)\)$", text, re.MULTILINE).group(1).split() == STEPS
    for step in STEPS:
        assert f"if wants {step}; then" in text, step


def test_the_loan_calibrates_records_its_list_then_traces_and_labs(tmp_path):
    proc = gpu_run("--loan", "--dry-run", out=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert planned(proc) == ["calibrate", "record", "traces", "labs"]
    record = next(line for line in proc.stdout.splitlines() if line.startswith("  record"))
    assert "timeout -s INT 300 " in record
    assert all(f" {name} " in record for name in loan_experiments())
    # The second call of a loan: the tests alone, without the loan's experiments.
    proc = gpu_run("--loan", "--only", "tests", "--dry-run", out=tmp_path / "out")
    assert proc.returncode == 0 and planned(proc) == ["tests"]


def test_the_loan_records_registered_one_gpu_experiments():
    names = loan_experiments()
    assert len(names) == len(set(names)) >= 8
    known = registry.REGISTRY.names()
    for name in names:
        assert name in known, name
        assert "gpus2" not in registry.get(name).needs, name  # a loan is one GPU
    for added in ("model_steps", "model_op_dtypes", "batchnorm_channels", "layernorm_sizes", "embedding_sizes"):
        assert added in names


def test_the_chapters_step_runs_the_chapters_named(tmp_path):
    proc = gpu_run("--only", "chapters", "--chapters", "01 06", "--dry-run", out=tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("  chapters"))
    assert "run_chapters.py chapters/01_background.md chapters/06_memory_limited.md --out" in line


@pytest.mark.parametrize("args, says", [
    (["--only", "bogus"], "--only takes steps from"),
    (["--only", "record,,tests"], "got ''"),
    (["--only", ""], "--only got no step"),
    (["--only"], "--only needs steps"),
    (["--budget", "5m"], "--budget must be a whole number"),
    (["--tests-budget", "-1"], "--tests-budget must be a whole number"),
    (["--only", "tests", "--experiments", "gemm_sizes"], "--experiments is for the record step"),
    (["--experiments", "gemm-sizes"], "--experiments takes names like gemm_sizes"),
    (["--frobnicate"], "unknown argument '--frobnicate'"),
    (["--only", "chapters", "--chapters", "1"], "two-digit chapter numbers like 01, got '1'"),
    (["--only", "chapters", "--chapters", "89"], "no chapters/89_*.md"),
    (["--only", "tests", "--chapters", "01"], "--chapters is for the chapters step"),
])
def test_bad_arguments_are_refused_before_anything_runs(tmp_path, args, says):
    out = tmp_path / "out"
    proc = gpu_run(*args, out=out)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert not out.exists()


def test_plan_loan_holds_the_plan_to_its_budget():
    script = [sys.executable, str(REPO / "scripts" / "plan_loan.py"), "--no-check", "--experiments", "gemm_small_n"]
    fits = subprocess.run([*script, "--budget", "600"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert fits.returncode == 0, fits.stderr
    assert "gemm_small_n" in fits.stdout and "fits" in fits.stdout
    over = subprocess.run([*script, "--budget", "1"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert over.returncode == 1 and "does NOT fit" in over.stdout
    bad = subprocess.run([*script[:-1], "no_such_experiment"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert bad.returncode == 2 and "no_such_experiment" in bad.stderr
