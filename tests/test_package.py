"""perfkit as a package: `python -m build` makes an sdist and, from it, a wheel that installs into a
clean virtual environment and works there, away from the repository (data files included).

The clean environment gets the wheel with ``--no-deps``; its dependencies (numpy, pandas, …) are
borrowed from the test's own environment through a path file, so nothing is downloaded. That
path file adds the folder as a plain path, so the repository's editable install is not loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

import perfkit

from testkit import REPO


def _pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_every_package_is_listed():
    """Listed by hand (a [tool.setuptools.packages.find] cannot keep the data/ → perfkit._data mapping)."""
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "perfkit").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found | {"perfkit._data"} == listed, (f"pyproject.toml [tool.setuptools] packages must list every "
                                                 f"package: missing {sorted(found - listed)}, "
                                                 f"extra {sorted(listed - found - {'perfkit._data'})}")


def test_version_in_one_place():
    project = _pyproject()["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert _pyproject()["tool"]["setuptools"]["dynamic"]["version"]["attr"] == "perfkit._version.__version__"
    hard_coded = [p.relative_to(REPO).as_posix() for p in (REPO / "perfkit").rglob("*.py")
                  if p.name != "_version.py" and f'"{perfkit.__version__}"' in p.read_text(encoding="utf-8")]
    assert not hard_coded, f"the version string is repeated in {hard_coded}; import perfkit._version instead"


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=600, cwd=out)
    assert proc.returncode == 0, f"python -m build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return out


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, f"expected one {pattern} in {folder}, found {found}"
    return found[0]


def _data_files() -> list[str]:
    return sorted(p.relative_to(REPO / "data").as_posix() for p in (REPO / "data").rglob("*")
                  if p.is_file() and p.suffix in (".csv", ".json", ".md"))


@pytest.mark.slow  # builds the package
def test_sdist_and_wheel_contents(dist):
    version = perfkit.__version__
    sdist = _one(dist, f"perfkit-{version}.tar.gz")
    wheel = _one(dist, f"perfkit-{version}-py3-none-any.whl")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ["pyproject.toml", "README.md", "perfkit/__init__.py", "perfkit/_version.py",
                   *(f"data/{f}" for f in _data_files())]:
        assert needed in names, f"the sdist lacks {needed}"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for needed in ["perfkit/__init__.py", "perfkit/book/gemm/problems.py", "perfkit/book/interactive.py",
                   "perfkit/book/chapters.py", "perfkit/experiments/registry.py", "perfkit/experiments/record.py",
                   *(f"perfkit/_data/{f}" for f in _data_files())]:
        assert needed in names, f"the wheel lacks {needed}"
    assert not [n for n in names if n.startswith(("tests/", "chapters/", "data/"))], "the wheel carries non-package files"
    published = [n for n in names if "published" in n.lower() and not n.endswith(".py")]
    assert not published, f"the wheel ships published third-party data: {published}"
    csvs = {Path(n).name for n in names if n.endswith(".csv")}
    from perfkit.published_data import CATALOG
    assert not csvs & {Path(e.file).name for e in CATALOG.values()}, "the wheel ships a published table"


@pytest.mark.slow  # builds the package, spawns processes
def test_wheel_installs_and_works_in_a_clean_venv(dist, tmp_path):
    wheel = _one(dist, "perfkit-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = f"""
import perfkit as pk, perfkit.book.problems, perfkit.book.interactive
from pathlib import Path
assert Path(pk.__file__).resolve().is_relative_to(Path({str(venv)!r}).resolve()), pk.__file__
assert pk.__version__ == {perfkit.__version__!r}
assert pk.data.repo_data_dir().name == "_data", pk.data.repo_data_dir()
sources = pk.published_sources()
assert len(sources) == len(pk.published_data.CATALOG) and not sources["available"].any(), sources
try:
    pk.published("xla_h100_gemm")
except pk.published_data.PublishedDataMissing as e:
    assert "PERFKIT_PUBLISHED" in str(e) and "perfkit published fetch" in str(e), e
else:
    raise AssertionError("the wheel found published data")
assert pk.book.problems.check("gemm-1", pk.book.problems.answer("gemm-1"))
print("ok", pk.__version__, pk.__file__)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PERFKIT_DATA", "PERFKIT_PUBLISHED")}
    env["HOME"] = str(tmp_path)  # no ~/.cache/perfkit/published from an earlier fetch
    proc = subprocess.run([str(py), "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=env)
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr
    cli = subprocess.run([str(py), "-m", "perfkit", "list"], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=env)
    assert cli.returncode == 0 and "gemm" in cli.stdout, cli.stdout + cli.stderr
