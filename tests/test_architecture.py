"""The shape of the package: small modules, one-way imports, one home for labels and for units.

These tests read perfkit's source; they catch drift that no behavioural test would.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "perfkit"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 400


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module imported from, names) for every import in ``path``."""
    package = _name(path) if _is_package(path) else _name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.append((module, [a.name for a in node.names]))
    return found


def _strings(path: Path) -> list[str]:
    """Every string constant of a module except docstrings."""
    tree = _tree(path)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_is_longer_than_400_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines; split it by concern (at most {MAX_LINES})"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_nothing_imports_the_package_itself(path):
    """A module imports submodules (``from .data import load``), never a name from an ``__init__`` above it."""
    me = _name(path)
    for module, names in _imports(path):
        if not module.startswith("perfkit"):
            continue
        target = PACKAGE.parent / module.replace(".", "/")
        if target.is_dir() and (me == module or me.startswith(module + ".")):  # an ancestor package
            for name in names:
                assert (target / f"{name}.py").is_file() or (target / name).is_dir(), (
                    f"{me} imports {name!r} from its own package {module}'s __init__; import it from "
                    "the submodule that defines it")
        assert not (module == "perfkit" and not names), f"{me} does `import perfkit`"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_labels_are_made_only_in_provenance(path):
    if path.name == "provenance.py":
        return
    phrases = ("live on", "recorded on", "published by", "model of", "(quick sweep)")
    found = [s for s in _strings(path) if any(p in s for p in phrases)]
    assert not found, f"{_name(path)} builds a source label itself ({found}); use perfkit.provenance"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_durations_are_formatted_only_in_units(path):
    if path.name == "units.py" or (path.parent.name == "published_data" and path.name.startswith("extract_")):
        return  # the extractors read other people's units ("Time (usec)"); they format nothing
    found = [s for s in _strings(path) if "µs" in s or " ms" in s]
    assert not found, f"{_name(path)} formats durations itself ({found}); use perfkit.units.format_time"


#: The book's experiment modules (they measure) and figure modules (they draw), by their last name.
EXPERIMENT_MODULES = ("experiments", "ceilings", "fusion", "convnet", "measure", "registry")
FIGURE_MODULES = ("figures", "fusion_figures")


def test_data_flows_one_way():
    """Experiments never read data/ nor draw; figures never run experiments nor read data/."""
    experiments = figures = 0
    for path in MODULES:
        me = _name(path)
        if not me.startswith("perfkit.book."):
            continue
        imported = {m for module, names in _imports(path) for m in (module, *(f"{module}.{n}" for n in names))}
        last = me.rsplit(".", 1)[1]
        if last in EXPERIMENT_MODULES:
            experiments += 1
            bad = {m for m in imported if m.startswith(("perfkit.data", "perfkit.provenance", "perfkit.book.record",
                                                        "matplotlib"))
                   or m.rsplit(".", 1)[-1] in FIGURE_MODULES}
            assert not bad, f"{me} imports {bad}"
        if last in FIGURE_MODULES:
            figures += 1
            bad = {m for m in imported if m.startswith(("perfkit.data", "perfkit.book.record"))
                   or (m.startswith("perfkit.book.") and m.rsplit(".", 1)[-1] in EXPERIMENT_MODULES)}
            assert not bad, f"{me} imports {bad}"
    assert experiments >= 10 and figures >= 9, (experiments, figures)  # the rule is checked on the real modules


def test_public_api_keeps_working():
    import perfkit as pk

    names = ["KNOWN_DEVICES", "DeviceSpec", "current_device", "device_spec", "match_driver_name", "DTYPES",
             "canonical_dtype", "itemsize", "torch_dtype", "REGISTRY", "run_or_load", "tiled_matmul", "triton_mode",
             "CANDIDATE_TILES", "GemmPrediction", "explain_gemm", "predict_gemm_time", "prediction_error",
             "alignment", "pad_to_multiple", "tile_quantization", "wave_quantization", "archive", "record",
             "Operation", "arithmetic_intensity", "attainable_flops", "gemm_bytes", "gemm_flops", "gemm_operation",
             "nvidia_example_operations", "roofline_time", "RNN_GATES", "conv_gemms", "conv_output_size",
             "linear_gemms", "rnn_gemms", "Measurement", "NoiseWarning", "bench", "to_gbps", "to_tflops",
             "live_source", "plot_roofline", "roofline_explorer", "gemm_explorer", "data", "book",
             "__version__", "source_of", "caption", "Source", "cdiv", "is_aligned", "TILE_SHAPE_FACTORS",
             "published", "published_all", "published_sources", "published_counterparts", "then_now",
             "math_bound_batch", "batch_crossover", "judge", "finding", "verdict_table", "Finding",
             "padded_linear", "padded_conv2d", "layer_bytes", "chain_bytes", "memory_time", "predict_layer_time",
             "pool_output_shape", "advise", "advisor", "zoo",
             "persistent_rnn", "persistent_rnn_plan", "max_persistent_hidden", "rnn_reference", "PersistentPlan"]
    missing = [n for n in names if not hasattr(pk, n)]
    assert not missing, f"perfkit lost public names: {missing}"


def test_importing_perfkit_imports_neither_triton_nor_cupy_nor_matplotlib():
    code = ("import sys, perfkit, perfkit.timing, perfkit.kernels; "
            "bad = [m for m in ('triton', 'cupy', 'matplotlib', 'ipywidgets') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
