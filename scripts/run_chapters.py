#!/usr/bin/env python
"""Run every chapter (MyST notebook, ``chapters/*.md``) as a plain Python script, without Jupyter.

This is how a machine with no Jupyter stack (the GPU machine) checks that every chapter runs:

- the ```` ```{code-cell} ```` blocks of a chapter are read in order; their option headers
  (``:tags: [...]`` lines, or a ``---`` ... ``---`` YAML block) are skipped, and lines starting
  with ``%`` or ``!`` (IPython magics and shell escapes) are dropped (replaced by ``pass``);
- the cells run in one namespace per chapter, each chapter in its own Python process (a crash or a
  hang in one cannot take the others down), with the chapter's folder as working directory (as
  Jupyter Book runs them), ``MPLBACKEND=Agg``, and ``display`` defined (``IPython.display.display``
  if IPython is installed, else ``print``);
- as in a notebook, a cell's last expression is displayed when it is not ``None``, and the
  pyplot figures a cell leaves open are shown (saved as PNG under ``--out``) and closed.

Usage::

    python scripts/run_chapters.py [CHAPTER.md ...] [--out DIR] [--timeout SECONDS]

Prints pass/fail and the time per chapter; exits 1 if any chapter failed.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})\s*\{code-cell\}(?P<rest>.*)$")
_OPTION = re.compile(r"^\s*:[A-Za-z_][\w-]*:")


def code_cells(text: str) -> list[str]:
    """The source of each ``{code-cell}`` block of a MyST notebook, options and magics removed."""
    lines = text.splitlines()
    cells: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        body: list[str] = []
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                break
            body.append(lines[i])
            i += 1
        i += 1  # past the closing fence
        # Option header: a YAML block between '---' lines, or ':key: value' lines.
        if body and body[0].strip() == "---":
            end = next((j for j in range(1, len(body)) if body[j].strip() == "---"), None)
            if end is not None:
                body = body[end + 1:]
        else:
            while body and _OPTION.match(body[0]):
                body = body[1:]
        # A magic becomes `pass` (same indentation), so a block left without it stays valid.
        source = [line[: len(line) - len(line.lstrip())] + "pass  # IPython magic dropped"
                  if line.lstrip().startswith(("%", "!")) else line for line in body]
        cells.append("\n".join(source))
    return cells


# ---------------------------------------------------------------------------------------------
# One chapter, in this process


def _make_display(out: Path | None, stem: str, saved: list[int]):
    try:
        from IPython.display import display as ipy_display
    except ImportError:
        ipy_display = None

    def save(fig) -> None:
        saved[0] += 1
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"{stem}-{saved[0]:02d}.png"
            fig.savefig(path, dpi=100, bbox_inches="tight")
            print(f"[figure saved: {path}]")
        else:
            print(f"[figure {saved[0]}]")

    def display(*objs, **kwargs) -> None:
        for obj in objs:
            if type(obj).__name__ == "Figure" and hasattr(obj, "savefig"):
                save(obj)
                try:
                    import matplotlib.pyplot as plt

                    plt.close(obj)
                except Exception:  # noqa: BLE001
                    pass
            elif ipy_display is not None:
                ipy_display(obj, **kwargs)
            else:
                print(obj)

    return display, save


def _run_one(chapter: Path, out: Path | None) -> int:
    os.environ["MPLBACKEND"] = "Agg"
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    cells = code_cells(chapter.read_text(encoding="utf-8"))
    saved = [0]
    display, save = _make_display(out.resolve() if out else None, chapter.stem, saved)
    namespace = {"__name__": "__main__", "__file__": str(chapter), "display": display}
    os.chdir(chapter.parent)
    for n, source in enumerate(cells, 1):
        t0 = time.perf_counter()
        try:
            tree = ast.parse(source, filename=f"{chapter.name}[cell {n}]")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, f"{chapter.name}[cell {n}]", "exec"), namespace)
            if last is not None:
                value = eval(compile(last, f"{chapter.name}[cell {n}]", "eval"), namespace)
                if value is not None:
                    display(value)
            if "matplotlib.pyplot" in sys.modules:  # what the inline backend does after a cell
                plt = sys.modules["matplotlib.pyplot"]
                for num in plt.get_fignums():
                    save(plt.figure(num))
                plt.close("all")
        except BaseException:
            print(f"FAILED in cell {n} of {chapter.name}:\n{source}\n", file=sys.stderr)
            traceback.print_exc()
            return 1
        print(f"[cell {n}/{len(cells)} ok, {time.perf_counter() - t0:.1f} s]", flush=True)
    return 0


# ---------------------------------------------------------------------------------------------
# Every chapter, one process each


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Run MyST notebook chapters as plain Python (no Jupyter).")
    p.add_argument("chapters", nargs="*", type=Path, help="chapter .md files (default: chapters/*.md)")
    p.add_argument("--out", type=Path, default=None, help="save each figure as DIR/<chapter>-NN.png")
    p.add_argument("--timeout", type=float, default=900, help="seconds per chapter (default 900)")
    p.add_argument("--one", type=Path, default=None, help=argparse.SUPPRESS)  # internal: run in-process
    args = p.parse_args(argv)
    if args.one is not None:
        return _run_one(args.one.resolve(), args.out)

    chapters = [c.resolve() for c in args.chapters] or sorted((REPO / "chapters").glob("*.md"))
    if not chapters:
        print("run_chapters: no chapters found", file=sys.stderr)
        return 1
    missing = [str(c) for c in chapters if not c.is_file()]
    if missing:
        print(f"run_chapters: no such chapter file(s): {', '.join(missing)}", file=sys.stderr)
        return 1
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    results = []
    for chapter in chapters:
        print(f"=== {chapter.name}", flush=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", str(chapter)]
        if args.out is not None:
            cmd += ["--out", str(args.out.resolve())]
        t0 = time.perf_counter()
        try:
            rc = subprocess.run(cmd, env=env, timeout=args.timeout).returncode
            status = "pass" if rc == 0 else "FAIL"
        except subprocess.TimeoutExpired:
            status = f"FAIL (timeout after {args.timeout:.0f} s)"
        elapsed = time.perf_counter() - t0
        results.append((chapter.name, status, elapsed))
        print(f"=== {chapter.name}: {status} in {elapsed:.1f} s", flush=True)
    print("\nsummary:")
    w = max(len(r[0]) for r in results)
    for name, status, elapsed in results:
        print(f"  {name:<{w}}  {status:<6}  {elapsed:7.1f} s")
    failed = [r for r in results if not r[1].startswith("pass")]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
