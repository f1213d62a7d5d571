#!/usr/bin/env python
"""Write every chapter's first cell, the hidden cell that installs perfkit on Colab, from one place.

Where perfkit is installed from is configured once, in ``_config.yml``: ``repository.url`` and
``repository.branch`` (the same keys give the Colab launch buttons their notebook). A Colab
notebook is all Colab fetches, so each chapter must carry the install line itself; this script
generates it, and ``tests/book/test_book.py`` fails when a chapter's cell differs from what the
script would write. The cell never touches torch: Colab's own CUDA build must stay.

Usage::

    python scripts/colab_cell.py          # rewrite chapters/*.md and their paired .ipynb
    python scripts/colab_cell.py --check  # exit 1 and list the chapters that are out of date
"""

from __future__ import annotations

import argparse
import re
import textwrap
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
FIRST_CELL = re.compile(r"```\{code-cell\} ipython3\n:tags: \[remove-cell\]\n\n# Colab only:.*?\n```\n", re.S)


def install_spec() -> str:
    """The pip requirement Colab installs: ``perfkit[fetch] @ git+<repository.url>@<repository.branch>``."""
    with open(REPO / "_config.yml", encoding="utf-8") as f:
        repo = yaml.safe_load(f)["repository"]
    return f"perfkit[fetch] @ git+{repo['url']}@{repo['branch']}"


def book_tables() -> list[str]:
    """The published tables the book's pages read (every catalogued one a chapter of the book uses)."""
    sys.path.insert(0, str(REPO))
    from perfkit.published_data.catalog import CATALOG

    pages = {p.stem.split("_", 1)[1] for p in (REPO / "chapters").glob("[0-9]*_*.md")}
    return [name for name, e in CATALOG.items() if set(e.chapters) & pages]


def cell(fetch: bool = True) -> str:
    """The first code cell of every chapter, as MyST Markdown; without ``fetch`` (the teaching page
    and the labs, which read only perfkit's own recordings) it installs perfkit and fetches nothing."""
    head = ("```{code-cell} ipython3\n:tags: [remove-cell]\n\n"
            "# Colab only: install perfkit (from _config.yml's repository; written by\n"
            "# scripts/colab_cell.py). It leaves Colab's own torch alone: perfkit does not pin it.\n")
    if not fetch:
        return (head + "# This page reads only perfkit's own recordings: nothing else to fetch.\n"
                "import sys\n"
                'if "google.colab" in sys.modules:\n'
                f'    %pip install -q "{install_spec()}"\n'
                "```\n")
    return (head +
            "# The published measurements the book reads are not in perfkit: fetch them once from\n"
            "# their sources (pinned commits, checksummed); without them pages draw the model.\n"
            "import sys\n"
            'if "google.colab" in sys.modules:\n'
            f'    %pip install -q "{install_spec()}"\n'
            f"    tables = {_wrapped(book_tables())}\n"
            "    !python -m perfkit published fetch {tables}\n"
            "```\n")


def _wrapped(names: list[str]) -> str:
    """The names as one Python string literal, split into lines of at most 92 characters."""
    lines = textwrap.wrap(" ".join(names), 92 - 18, break_on_hyphens=False)
    parts = [f'"{line} "' for line in lines[:-1]] + [f'"{lines[-1]}"']
    return "(" + "\n              ".join(parts) + ")"


def chapters() -> list[Path]:
    """Every notebook page Colab can open: the landing page, the chapters, the rules page, the
    teaching page and the labs."""
    return [REPO / "intro.md", *sorted((REPO / "chapters").glob("*.md")), REPO / "rules.md",
            REPO / "teach.md", *sorted((REPO / "labs").glob("*.md"))]


def fetches(path: Path) -> bool:
    """Whether the page at ``path`` reads published tables (all but the teaching page and the labs)."""
    rel = path.resolve().relative_to(REPO).as_posix()
    return not (rel == "teach.md" or rel.startswith("labs/"))


def updated(text: str, fetch: bool = True) -> str:
    """``text`` (a chapter) with its Colab cell replaced by :func:`cell` (added if it has none)."""
    m = FIRST_CELL.search(text)
    if m is not None:
        return text[:m.start()] + cell(fetch) + text[m.end():]
    first = text.find("```{code-cell}")  # a new chapter: the cell goes before its first code cell
    if first < 0:
        raise ValueError("the chapter has no code cell, so it is not a notebook chapter")
    return text[:first] + cell(fetch) + "\n" + text[first:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report chapters that are out of date")
    args = parser.parse_args(argv)
    stale = []
    for md in chapters():
        text = md.read_text(encoding="utf-8")
        new = updated(text, fetches(md))
        if new == text:
            continue
        stale.append(md.relative_to(REPO).as_posix())
        if not args.check:
            md.write_text(new, encoding="utf-8")
            subprocess.run([sys.executable, "-m", "jupytext", "--update", "--to", "ipynb", str(md)],
                           check=True, capture_output=True)
    if args.check and stale:
        print("out of date (run python scripts/colab_cell.py):", *stale, sep="\n  ")
        return 1
    print(("updated: " + ", ".join(stale)) if stale else "every chapter's Colab cell is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
