"""The shape of the package: small modules, one-way imports, one home for labels and for units.

These tests read perfkit's source; they catch drift that no behavioural test would.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

from testkit import PACKAGE
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 400


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".").removesuffix(".__init__")


@functools.lru_cache(maxsize=None)
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


def _offenders(check) -> list[str]:
    """``check(path)`` for every module: the messages of those that break the rule (None: it keeps it)."""
    return [message for path in MODULES if (message := check(path))]


def _fail(offenders: list[str], rule: str) -> str:
    return f"{len(offenders)} module(s) break the rule, {rule}:\n  " + "\n  ".join(offenders)


def test_no_module_is_longer_than_400_lines():
    def check(path):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        return f"{_name(path)} has {lines} lines" if lines > MAX_LINES else None

    offenders = _offenders(check)
    assert not offenders, _fail(offenders, f"at most {MAX_LINES} lines; split them by concern")


def test_nothing_imports_the_package_itself():
    """A module imports submodules (``from .data import load``), never a name from an ``__init__`` above it."""
    def check(path):
        me, found = _name(path), []
        for module, names in _imports(path):
            if not module.startswith("perfkit"):
                continue
            target = PACKAGE.parent / module.replace(".", "/")
            if target.is_dir() and (me == module or me.startswith(module + ".")):  # an ancestor package
                found += [f"{name!r} from {module}" for name in names
                          if not ((target / f"{name}.py").is_file() or (target / name).is_dir())]
            if module == "perfkit" and not names:
                found.append("`import perfkit`")
        return f"{me} imports {', '.join(found)}" if found else None

    offenders = _offenders(check)
    assert not offenders, _fail(offenders, "import a name from the submodule that defines it, not from an "
                                           "__init__ above you")


def test_labels_are_made_only_in_provenance():
    phrases = ("live on", "recorded on", "published by", "model of", "(quick sweep)")

    def check(path):
        if path.name == "provenance.py":
            return None
        found = [s for s in _strings(path) if any(p in s for p in phrases)]
        return f"{_name(path)}: {found}" if found else None

    offenders = _offenders(check)
    assert not offenders, _fail(offenders, "source labels are built only by perfkit.provenance")


def test_durations_are_formatted_only_in_units():
    def check(path):
        if path.name == "units.py" or (path.parent.name == "published_data" and path.name.startswith("extract_")):
            return None  # the extractors read other people's units ("Time (usec)"); they format nothing
        found = [s for s in _strings(path) if "µs" in s or " ms" in s]
        return f"{_name(path)}: {found}" if found else None

    offenders = _offenders(check)
    assert not offenders, _fail(offenders, "durations are formatted only by perfkit.units.format_time")


def _package_of(path: Path) -> str:
    return _name(path) if _is_package(path) else _name(path).rpartition(".")[0]


def registering_modules() -> dict[str, str]:
    """Experiment name → the perfkit module whose source calls the registry's ``register`` with it
    (``@register("name", …)``, ``register("name", …)(f)``, ``registry.register("name", …)``): the
    experiment modules, found by what they do, whatever they are called."""
    found: dict[str, str] = {}
    for path in MODULES:
        me, tree = _name(path), _tree(path)
        functions, modules = set(), set()  # local names of registry.register, and of the registry module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(node, _package_of(path))
                for alias in node.names:
                    if source == REGISTRY_MODULE and alias.name == "register":
                        functions.add(alias.asname or alias.name)
                    if f"{source}.{alias.name}" == REGISTRY_MODULE:
                        modules.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            f = getattr(node, "func", None)
            if isinstance(node, ast.Call) and ((isinstance(f, ast.Name) and f.id in functions) or (
                    isinstance(f, ast.Attribute) and f.attr == "register" and isinstance(f.value, ast.Name)
                    and f.value.id in modules)):
                assert node.args and isinstance(node.args[0], ast.Constant), f"{me}: register's name is not a literal"
                name = node.args[0].value
                assert name not in found, f"{name!r} is registered by {found[name]} and by {me}"
                found[name] = me
    return found


#: The registry's module; the experiment machinery that experiment modules share, held to their rule too.
REGISTRY_MODULE = "perfkit.experiments.registry"
SHARED = (REGISTRY_MODULE, "perfkit.experiments.measure")
#: What reads recordings: experiments never import it, figures never run experiments through it.
READERS = ("perfkit.data", "perfkit.experiments.record", "perfkit.experiments.run")
#: The book's figure modules (they draw), by their last name.
FIGURE_MODULES = ("figures", "fusion_figures")


def test_data_flows_one_way():
    """Experiments (the modules that call ``register``, and what they share) never read data/ nor
    draw; figures never run experiments nor read data/."""
    experiments = {*registering_modules().values(), *SHARED}
    offenders, figures = [], 0
    for path in MODULES:
        me = _name(path)
        imported = {m for module, names in _imports(path) for m in (module, *(f"{module}.{n}" for n in names))}
        if me in experiments:
            bad = {m for m in imported if m.startswith((*READERS, "perfkit.provenance", "matplotlib"))
                   or m.rsplit(".", 1)[-1] in FIGURE_MODULES}
            offenders += [f"{me} (measures) imports {sorted(bad)}"] if bad else []
        if me.startswith("perfkit.book.") and me.rsplit(".", 1)[1] in FIGURE_MODULES:
            figures += 1
            bad = {m for m in imported if m.startswith(READERS) or m in experiments}
            offenders += [f"{me} (draws) imports {sorted(bad)}"] if bad else []
    assert not offenders, _fail(offenders, "data flows one way: experiments → recordings → figures")
    assert len(experiments) >= 14 and figures >= 9, (experiments, figures)  # checked on the real modules
    assert "perfkit.book.transformers.decoding" in experiments  # registers decode_steps: found by what it does


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


@pytest.mark.slow  # spawns a process
def test_importing_perfkit_imports_neither_triton_nor_cupy_nor_matplotlib():
    code = ("import sys, perfkit, perfkit.timing, perfkit.kernels; "
            "bad = [m for m in ('triton', 'cupy', 'matplotlib', 'ipywidgets') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------------
# Layers: the core, the edge that reads and writes data, the experiment machinery, the book on top;
# arrows only point down (core < edge < experiments < book < top).

#: The edge: what reads or writes data/, the published tables, or labels where numbers come from.
EDGE = ("perfkit.data", "perfkit.provenance", "perfkit.calibration", "perfkit.environment", "perfkit.validation",
        "perfkit.published_data", "perfkit.attention_validation")
#: The experiment machinery: the registry, what experiments share, running and recording them.
MACHINERY = ("perfkit.experiments",)
#: The book: one folder per chapter and what the chapters share (its experiments among them).
BOOK = ("perfkit.book",)
RANK = {"core": 0, "edge": 1, "experiments": 2, "book": 3, "top": 4}
#: Imported inside a function only because they are optional or heavy (never a perfkit module)...
DEFERRED = ("torch", "triton", "cupy", "pynvml", "matplotlib", "IPython", "tqdm", "openpyxl")
#: ...or a perfkit module that imports torch at its top (so that importing an experiment module, or
#: the command line, does not import torch before it is used).
HEAVY = ("perfkit.padding", "perfkit.advisor", "perfkit.zoo")


def _layer(module: str) -> str:
    if module == "perfkit" or module == "perfkit.__main__":
        return "top"
    for layer, prefixes in (("book", BOOK), ("experiments", MACHINERY), ("edge", EDGE)):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return layer
    return "core"


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The absolute module an ``ImportFrom`` in ``package`` reads from."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    return ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))


def _dynamic_imports(path: Path, tree: ast.Module) -> list[tuple[ast.Call, str]]:
    """The modules ``path`` imports by name, with constant arguments: ``importlib.import_module("perfkit.x")``,
    ``import_module(".x", __name__ or __package__)`` and ``use_catalog("perfkit.x")`` (the registry
    imports the catalog it is given)."""
    found = []
    for node in ast.walk(tree):
        f = node.func if isinstance(node, ast.Call) else None
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name not in ("import_module", "use_catalog") or not node.args:
            continue
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        module = first.value
        if name == "import_module" and module.startswith("."):
            anchor = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(anchor, ast.Name) and anchor.id in ("__name__", "__package__")):
                continue
            base = (_name(path) if anchor.id == "__name__" else _package_of(path)).split(".")
            level = len(module) - len(module.lstrip("."))
            module = ".".join(base[: len(base) - level + 1] + [module.lstrip(".")]).rstrip(".")
        found.append((node, module))
    return found


def _perfkit_imports(path: Path, *, nested: bool | None = None) -> set[str]:
    """The perfkit modules ``path`` imports (a name imported from a package counts as its submodule
    when there is one), ``import_module``/``use_catalog`` with constant names included; ``nested``:
    only imports inside functions (True), only at the top (False)."""
    package = _package_of(path)
    tree = _tree(path)
    inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f)}
    type_only = {id(n) for i in ast.walk(tree) if isinstance(i, ast.If) and "TYPE_CHECKING" in ast.unparse(i.test)
                 for n in ast.walk(i)}
    found = set()
    for node, module in _dynamic_imports(path, tree):
        if module.startswith("perfkit") and (nested is None or (id(node) in inner) == nested):
            found.add(module)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in type_only:
            continue
        if nested is not None and (id(node) in inner) != nested:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("perfkit")}
            continue
        module = _absolute(node, package)
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


def test_arrows_point_down():
    """The core imports neither the edge, the experiment machinery nor the book; the edge imports
    neither of the two above it; the experiment machinery never imports the book (it is given the
    book's catalog by name, from the top). Only the top (``perfkit``, ``perfkit.__main__``) names the book."""
    def check(path):
        me = _name(path)
        up = sorted(m for m in _perfkit_imports(path) if RANK[_layer(m)] > RANK[_layer(me)])
        return f"{me} ({_layer(me)}) imports {up}" if up else None

    offenders = _offenders(check)
    assert not offenders, _fail(offenders, "no module imports from a layer above it (core < edge < experiments "
                                           "< book < top)")
    assert _layer("perfkit.experiments.registry") == "experiments" and _layer("perfkit.book.gemm") == "book"


def test_the_catalog_is_given_from_the_top_and_followed():
    """``use_catalog("perfkit.book.chapters")`` is an arrow of the import graph: from the top, to the book."""
    top = _perfkit_imports(PACKAGE / "__init__.py")
    assert "perfkit.book.chapters" in top, "perfkit/__init__.py must give the registry its catalog by name"
    assert not any(_layer(m) == "book" for m in _perfkit_imports(PACKAGE / "experiments" / "registry.py"))


def test_imports_inside_functions_are_only_for_optional_or_heavy_dependencies():
    def check(path):
        found, package = [], _package_of(path)
        for node in ast.walk(_tree(path)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (inner.level or (inner.module or "").startswith("perfkit")):
                    module = _absolute(inner, package)
                    if not any(module == h or module.startswith(h + ".") for h in HEAVY):  # torch, when called
                        found.append(f"line {inner.lineno}: from {'.' * inner.level}{inner.module or ''}")
                elif isinstance(inner, ast.ImportFrom) and (inner.module or "").split(".")[0] not in DEFERRED:
                    found.append(f"line {inner.lineno}: from {inner.module}")
                elif isinstance(inner, ast.Import):
                    found += [f"line {inner.lineno}: import {a.name}" for a in inner.names
                              if not a.name.split(".")[0] in DEFERRED]
        return f"{_name(path)}: {found}" if found else None

    offenders = _offenders(check)
    assert not offenders, _fail(offenders, "import at the top, except optional or heavy dependencies")
    for heavy in HEAVY:  # each is heavy indeed: a module of it imports torch at its top
        tops = set()
        for path in (p for p in MODULES if _name(p) == heavy or _name(p).startswith(heavy + ".")):
            for node in _tree(path).body:
                if isinstance(node, ast.Import):
                    tops |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    tops.add((node.module or "").split(".")[0])
        assert "torch" in tops, f"{heavy} does not import torch at its top: import it at the top where it is used"


def test_the_public_api_is_small():
    import inspect

    import perfkit as pk

    # 45 + the six names issue 27 asks for at top level (attention_flops, attention_gemms, attention_bytes,
    # predict_attention_time, decode_step_bytes, predict_decode_time), + the four of issue 28 (link_spec,
    # collective_time, explain_collective, data_parallel_step), + the two of issue 42 (read_trace, diagnose_trace).
    assert len(pk.__all__) <= 57, f"perfkit.__all__ has {len(pk.__all__)} names (at most 57)"
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
    for gone in ("plots", "interactive", "exercises", "verdict"):
        assert not (PACKAGE / gone).exists(), f"perfkit/{gone}/ is back: a chapter's pieces live in perfkit/book/<chapter>/"
    outside = {n: m for n, m in registering_modules().items() if not m.startswith("perfkit.book.")}
    assert not outside, f"experiments registered outside the book: {outside}; they live in perfkit/book/<chapter>/"
