"""What an executed chapter must show: every figure call drew an image or a styled note.

Used by tests/book/test_book.py on the notebooks of the book build (with ``MPLBACKEND=Agg``; the
chapters nbval executed in the same session come from that execution), and runnable by hand on any
executed notebook::

    python tests/output_checks.py _build/jupyter_execute/chapters/02_gemm.ipynb
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

#: A call that should leave a figure in the cell's output: a figure function, an explorer widget or
#: an interactive figure. (A call inside a comment or a string is not counted.)
FIGURE_CALL = re.compile(r"\b\w+\.(?:plot_\w+|roofline_explorer|gemm_explorer|interactive\.\w+)\s*\(")
NOTE_CLASS = "perfkit-note"


def _text(data) -> str:
    return "".join(data) if isinstance(data, list) else str(data or "")


def shown(cell: dict) -> dict[str, int]:
    """How many images, notes, interactive figures and widgets a code cell's outputs show."""
    counts = {"images": 0, "notes": 0, "missing_instead": 0, "interactive": 0, "widgets": 0, "printed_no_figure": 0}
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            if "No figure" in _text(out.get("text")):
                counts["printed_no_figure"] += 1
            continue
        data = out.get("data", {})
        html = _text(data.get("text/html"))
        if "application/vnd.jupyter.widget-view+json" in data:
            counts["widgets"] += 1
        elif "perfkit-interactive" in html:
            counts["interactive"] += 1
        elif NOTE_CLASS in html:
            notes = html.count(f"{NOTE_CLASS}\"")
            counts["notes"] += notes
            if "No recording yet" in html and "Instead:" not in html:
                counts["missing_instead"] += 1
        elif "image/png" in data or "image/svg+xml" in data:
            counts["images"] += 1
    return counts


def _source(cell: dict) -> str:
    lines = _text(cell.get("source")).splitlines()
    return "\n".join(re.sub(r"#.*$", "", line) for line in lines)


def problems(notebook: Path | str | dict, name: str | None = None) -> list[str]:
    """Every figure call of ``notebook`` (executed: a path, or the notebook itself, named ``name``)
    that left no image, note, interactive figure or widget; every note about a missing recording
    that does not say what is shown instead; every printed "No figure" line."""
    if isinstance(notebook, dict):
        nb, name = notebook, name or "notebook"
    else:
        nb, name = json.loads(Path(notebook).read_text(encoding="utf-8")), name or Path(notebook).name
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        calls = len(FIGURE_CALL.findall(_source(cell)))
        c = shown(cell)
        drawn = c["images"] + c["notes"] + c["interactive"] + c["widgets"]
        first = _text(cell.get("source")).strip().splitlines()[-1:] or [""]
        where = f"{name} cell {i} ({first[0][:60]!r})"
        if calls and drawn < calls:
            found.append(f"{where}: {calls} figure call(s) but {drawn} shown ({c})")
        if c["missing_instead"]:
            found.append(f"{where}: a 'No recording yet' note does not say what is shown instead (instead=)")
        if c["printed_no_figure"]:
            found.append(f"{where}: prints 'No figure' as text instead of returning a note")
    return found


if __name__ == "__main__":
    bad = [p for arg in sys.argv[1:] for p in problems(arg)]
    print("\n".join(bad) or "every figure call shows an image or a note")
    sys.exit(1 if bad else 0)
