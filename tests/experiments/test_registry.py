"""perfkit.experiments.registry: the catalog of experiments, read by module name, never silently partial.

The registry knows which experiments exist from the catalog (``perfkit.book.chapters.EXPERIMENTS``:
name → the module whose ``@register`` defines it). Reading an experiment imports its module every
time, so a chapter that fails to import fails every read, loudly, and the others still resolve.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from perfkit.book.chapters import EXPERIMENTS
from perfkit.experiments import registry
from perfkit.experiments.registry import REGISTRY, get, register

from test_architecture import registering_modules


def _chapter(tmp_path, monkeypatch, package: str, source: str) -> str:
    """A chapter package ``package`` in ``tmp_path`` (on ``sys.path``) whose module ``experiments`` is ``source``."""
    folder = tmp_path / package
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "experiments.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{package}.experiments"


@pytest.fixture
def broken_chapter(tmp_path, monkeypatch):
    """The catalog lists ``_broken_probe`` in a module that registers it, then raises on import."""
    module = _chapter(tmp_path, monkeypatch, "pk_broken_chapter", """
        import pandas as pd
        from perfkit.experiments.registry import register

        @register("_broken_probe", "a probe whose chapter is broken", {"time_s": "seconds"})
        def probe(*, quick=False, progress=True, on_row=None):
            return pd.DataFrame({"time_s": [1.0]})

        raise RuntimeError("this chapter is broken")
    """)
    monkeypatch.setitem(EXPERIMENTS, "_broken_probe", module)
    yield "_broken_probe", module
    monkeypatch.undo()  # the catalog first: then the probe is no catalog experiment and can be removed
    REGISTRY.pop("_broken_probe", None)
    for name in [m for m in sys.modules if m.startswith("pk_broken_chapter")]:
        del sys.modules[name]


def test_a_chapter_that_fails_to_import_fails_every_read(broken_chapter):
    name, module = broken_chapter
    for attempt in ("first", "second"):
        with pytest.raises(ImportError) as failed:
            get(name)
        message = str(failed.value)
        assert module in message and "RuntimeError: this chapter is broken" in message, (attempt, message)
        assert isinstance(failed.value.__cause__, RuntimeError), attempt
    with pytest.raises(ImportError, match="this chapter is broken"):
        REGISTRY[name]
    with pytest.raises(ImportError, match="this chapter is broken"):
        list(REGISTRY)  # the whole registry is never silently partial
    assert name in REGISTRY  # it exists; its chapter is broken
    assert get("gemm_sizes").name == "gemm_sizes" and REGISTRY["decode_steps"].name == "decode_steps"


def test_a_module_that_does_not_register_its_listed_name_is_named(tmp_path, monkeypatch):
    module = _chapter(tmp_path, monkeypatch, "pk_empty_chapter", "X = 1\n")
    monkeypatch.setitem(EXPERIMENTS, "_unregistered_probe", module)
    try:
        with pytest.raises(LookupError, match=rf"_unregistered_probe.*{module}.*does not register it"):
            get("_unregistered_probe")
    finally:
        sys.modules.pop(module, None)
        sys.modules.pop("pk_empty_chapter", None)


def test_unknown_names_are_refused_listing_the_known_ones():
    for bad in ("no_such_experiment", ["gemm_sizes"], None):
        with pytest.raises(LookupError, match="gemm_sizes") as refused:
            get(bad)
        assert "decode_steps" in str(refused.value)
    with pytest.raises(KeyError):
        REGISTRY["no_such_experiment"]
    assert "no_such_experiment" not in REGISTRY and REGISTRY.get("no_such_experiment") is None


def test_the_registry_reads_the_catalog_in_its_order():
    assert list(REGISTRY) == list(EXPERIMENTS) == REGISTRY.names()
    assert len(REGISTRY) == len(EXPERIMENTS) and list(REGISTRY.keys()) == list(EXPERIMENTS)
    assert [e.name for e in REGISTRY.values()] == [n for n, _ in REGISTRY.items()] == list(EXPERIMENTS)
    assert not any(hasattr(REGISTRY, m) for m in ("clear", "update", "setdefault", "popitem"))  # not filled by hand
    with pytest.raises(TypeError, match="catalog"):
        REGISTRY.pop("gemm_sizes")


def test_a_name_is_registered_once_but_its_module_may_be_imported_again():
    get("gemm_sizes")

    def gemm_sizes(*, quick=False, progress=True, on_row=None):
        return pd.DataFrame({"time_s": [1.0]})

    with pytest.raises(ValueError, match="registered twice"):
        register("gemm_sizes", "another gemm_sizes", {"time_s": "s"})(gemm_sizes)

    def again(*, quick=False, progress=True, on_row=None):
        return pd.DataFrame({"time_s": [1.0]})

    try:
        for _ in range(2):  # the same function twice: what importing its module again does
            register("_again_probe", "a probe", {"time_s": "s"})(again)
        assert REGISTRY["_again_probe"]().shape == (1, 1)
    finally:
        REGISTRY.pop("_again_probe", None)


def test_the_catalog_lists_every_experiment_in_the_module_that_registers_it():
    found = registering_modules()  # by reading perfkit's source
    assert found, "no module calls register: the scan is broken"
    assert set(found.values()) >= {"perfkit.book.transformers.decoding", "perfkit.book.memory_limited.convnet"}
    unlisted = {n: m for n, m in found.items() if n not in EXPERIMENTS}
    assert not unlisted, f"experiments registered but not listed in perfkit.book.chapters.EXPERIMENTS: {unlisted}"
    wrong = {n: (EXPERIMENTS[n], found.get(n)) for n in EXPERIMENTS if found.get(n) != EXPERIMENTS[n]}
    assert not wrong, f"listed in one module, registered in another (listed, found): {wrong}"
    assert {n: REGISTRY[n].module for n in EXPERIMENTS} == EXPERIMENTS  # and so it is at run time


@pytest.mark.slow  # spawns a process
def test_importing_perfkit_imports_nothing_of_the_book():
    code = textwrap.dedent("""
        import sys
        import perfkit
        book = sorted(m for m in sys.modules if m.startswith("perfkit.book"))
        assert not book, book
        assert "matplotlib" not in sys.modules
        from perfkit.experiments.registry import REGISTRY
        names = list(REGISTRY)  # every experiment module imported: none draws, none needs torch to load
        heavy = [m for m in ("matplotlib", "plotly", "torch", "triton") if m in sys.modules]
        assert not heavy, heavy
        print(len(names))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == len(EXPERIMENTS)
