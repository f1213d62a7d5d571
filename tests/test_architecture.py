"""The shape of the package: small modules, one-way imports, one home for labels and for units.

These tests read perfkit's source; they catch drift that no behavioural test would.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from testkit import PACKAGE
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
    """What a library user needs stays one name away (the rest is one module away: pk.gemm_model, …)."""
    import perfkit as pk

    names = ["DeviceSpec", "device_spec", "current_device", "calibrated", "calibrate", "KNOWN_DEVICES", "DTYPES",
             "canonical_dtype",
             "itemsize", "arithmetic_intensity", "roofline_time", "math_bound_batch", "gemm_flops", "gemm_bytes",
             "alignment", "is_aligned", "pad_to_multiple", "tile_quantization", "wave_quantization", "linear_gemms",
             "conv_gemms", "rnn_gemms", "predict_gemm_time", "explain_gemm", "Ceilings", "achievable_ceilings",
             "layer_bytes", "chain_bytes", "memory_time", "predict_layer_time", "bench", "Measurement",
             "padded_linear", "padded_conv2d", "advise", "run_or_load", "record", "published", "published_or_none",
             "published_sources", "source_of", "note", "table", "device_card", "__version__"]
    missing = [n for n in names if not hasattr(pk, n)]
    assert not missing, f"perfkit lost public names: {missing}"
    for module in ("gemm_model", "memory_model", "provenance", "kernels", "zoo", "validation", "book", "advisor"):
        assert hasattr(pk, module), f"pk.{module} is not reachable"


def test_importing_perfkit_imports_neither_triton_nor_cupy_nor_matplotlib():
    code = ("import sys, perfkit, perfkit.timing, perfkit.kernels; "
            "bad = [m for m in ('triton', 'cupy', 'matplotlib', 'ipywidgets') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------------
# Layers: the core, the edge that reads and writes data, the book on top; arrows only point down.

#: The edge: what reads or writes data/, the published tables, or labels where numbers come from.
EDGE = ("perfkit.data", "perfkit.provenance", "perfkit.calibration", "perfkit.environment", "perfkit.validation",
        "perfkit.published_data")
#: The book: one folder per chapter and what the chapters share.
BOOK = ("perfkit.book",)
#: Imported inside a function only because they are optional or heavy (never a perfkit module).
DEFERRED = ("torch", "triton", "cupy", "pynvml", "matplotlib", "IPython", "tqdm", "openpyxl")


def _layer(module: str) -> str:
    if module == "perfkit" or module == "perfkit.__main__":
        return "top"
    if module.startswith(BOOK):
        return "book"
    if module.startswith(EDGE):
        return "edge"
    return "core"


def _perfkit_imports(path: Path, *, nested: bool | None = None) -> set[str]:
    """The perfkit modules ``path`` imports (a name imported from a package counts as its submodule
    when there is one); ``nested``: only imports inside functions (True), only at the top (False)."""
    package = _name(path) if _is_package(path) else _name(path).rpartition(".")[0]
    tree = _tree(path)
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f)}
    type_only = {id(n) for i in ast.walk(tree) if isinstance(i, ast.If) and "TYPE_CHECKING" in ast.unparse(i.test)
                 for n in ast.walk(i)}
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in type_only:
            continue
        if nested is not None and (id(node) in inner) != nested:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("perfkit")}
            continue
        if node.level:
            base = package.split(".")
            module = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        if not module.startswith("perfkit"):
            continue
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            target = PACKAGE.parent / sub.replace(".", "/")
            found.add(sub if (target.with_suffix(".py").is_file() or target.is_dir()) else module)
    return found - {_name(path)}


def _graph() -> dict[str, set[str]]:
    """Module → the modules importing it runs: what it imports, and the ``__init__`` of every package
    above those (importing ``perfkit.book.gemm.published`` runs ``perfkit/book/gemm/__init__.py``).
    The top package ``perfkit`` is left out: it is always imported first."""
    names = {_name(p) for p in MODULES}
    graph = {}
    for path in MODULES:
        me, found = _name(path), set()
        for module in _perfkit_imports(path):
            parts = module.split(".")
            found |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)}
        graph[me] = {m for m in found if m in names and m != me and not me.startswith(m + ".")}
    return graph


def test_no_import_cycle_counting_imports_inside_functions():
    graph = _graph()
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_arrows_point_down(path):
    """The core imports neither the edge nor the book; the edge never imports the book."""
    me, rank = _name(path), {"core": 0, "edge": 1, "book": 2, "top": 3}
    up = sorted(m for m in _perfkit_imports(path) if rank[_layer(m)] > rank[_layer(me)])
    assert not up, f"{me} ({_layer(me)}) imports {up} from a layer above it"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_imports_inside_functions_are_only_for_optional_or_heavy_dependencies(path):
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (inner.level or (inner.module or "").startswith("perfkit")):
                    if _name(path) != "perfkit" or inner.module not in ("padding", "advisor"):  # torch, when called
                        found.append(f"line {inner.lineno}: from {'.' * inner.level}{inner.module or ''}")
                elif isinstance(inner, ast.ImportFrom) and (inner.module or "").split(".")[0] not in DEFERRED:
                    found.append(f"line {inner.lineno}: from {inner.module}")
                elif isinstance(inner, ast.Import):
                    found += [f"line {inner.lineno}: import {a.name}" for a in inner.names
                              if not a.name.split(".")[0] in DEFERRED]
    assert not found, f"{_name(path)} imports inside functions: {found}; import at the top"


def test_the_public_api_is_small():
    import inspect

    import perfkit as pk

    # 45 + the six names issue 27 asks for at top level (attention_flops, attention_gemms, attention_bytes,
    # predict_attention_time, decode_step_bytes, predict_decode_time), + the four of issue 28 (link_spec,
    # collective_time, explain_collective, data_parallel_step).
    assert len(pk.__all__) <= 55, f"perfkit.__all__ has {len(pk.__all__)} names (at most 55)"
    public = sorted(n for n, v in vars(pk).items() if not n.startswith("_") and not inspect.ismodule(v)
                    and n != "annotations")
    assert set(public) == set(pk.__all__) - {"__version__"}, "perfkit's top level defines names __all__ does not list"
    missing = [n for n in pk.__all__ if not hasattr(pk, n)]
    assert not missing, missing


def test_each_chapter_has_one_folder_and_the_list_is_the_tocs():
    import re

    from perfkit.book.chapters import CHAPTERS

    toc = re.findall(r"^\s*- file: chapters/(\w+)", (PACKAGE.parent / "_toc.yml").read_text(encoding="utf-8"), re.M)
    assert list(CHAPTERS.values()) == toc
    for folder, stem in CHAPTERS.items():
        assert stem.split("_", 1)[1] == folder
        assert (PACKAGE / "book" / folder / "__init__.py").is_file(), f"chapters/{stem}.md has no perfkit/book/{folder}/"
    for gone in ("experiments", "plots", "interactive", "exercises", "verdict"):
        assert not (PACKAGE / gone).exists(), f"perfkit/{gone}/ is back: a chapter's pieces live in perfkit/book/<chapter>/"
