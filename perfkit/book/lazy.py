"""Lazy chapter folders: a folder's names are imported from their modules when first asked for (PEP 562).

A chapter's ``__init__.py`` says which module provides which name and hands the rest to :func:`lazy`::

    __getattr__, __dir__ = lazy(__name__, {"experiments": ["gemm_sizes", ...], "figures": ["plot_alignment"]})

so ``from perfkit.book import gemm; gemm.plot_alignment(...)`` and ``gemm.figures`` work as if
imported eagerly, while ``import perfkit.book.gemm.experiments`` (what the experiment registry
does) imports neither the figures nor matplotlib.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Iterable, Mapping

__all__ = ["lazy"]


def lazy(package: str, modules: Mapping[str, Iterable[str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the package ``package``: each of ``modules`` (submodule → the
    names it provides) is imported when it, or one of its names, is first asked for."""
    where: dict[str, str] = {}
    for module, names in modules.items():
        for name in (module, *names):
            if where.setdefault(name, module) != module:
                raise ValueError(f"{package}: {name!r} is provided by both .{where[name]} and .{module}")

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{where[name]}")
        value = module if name == where[name] else getattr(module, name)
        setattr(sys.modules[package], name, value)  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
