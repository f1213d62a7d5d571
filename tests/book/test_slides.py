"""The labs' reveal.js slide decks (perfkit/book/slides.py): the conversion of a notebook, the
Sphinx extension's pieces, and (slow) a tiny book built with the extension."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
import yaml
from nbconvert import SlidesExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from perfkit.book import slides
from perfkit.book.slides import (
    REVEAL_VERSION, assign_slide_types, deck_path, lab_docnames, lab_notebook, myst_to_markdown, to_slides,
    write_decks,
)
from testkit import REPO


def _code(source: str, *, tags=(), out: str | None = None):
    cell = new_code_cell(source, metadata={"tags": list(tags)} if tags else {})
    if out is not None:
        cell.outputs = [new_output("stream", name="stdout", text=out)]
        cell.execution_count = 1
    return cell


def _slides_of(html: str) -> list[str]:
    """The innermost <section>s of a deck (one per slide or sub-slide), as HTML."""
    return re.findall(r"<section[^>]*>((?:(?!<section).)*?)</section>", html, re.S)


# --------------------------------------------------------------------------------------------
# MyST → Markdown


def test_roles_become_their_text():
    md = myst_to_markdown("See {doc}`the GEMM chapter <../chapters/02_gemm>`, {doc}`intro`, {ref}`sec-x` "
                          "and {math}`x^2`.")
    assert md == "See the GEMM chapter, intro, sec-x and $x^2$."
    assert myst_to_markdown("Block 1 ({doc}`/teach`), then {doc}`../chapters/02_gemm`.") == (
        "Block 1 (teach), then 02_gemm.")


def test_glue_role_takes_the_glued_value():
    assert myst_to_markdown("Speed {glue:text}`tflops:.1f` TF, {glue}`name`.",
                            glue={"tflops": "312.04", "name": "'H100'"}) == "Speed 312.0 TF, 'H100'."
    assert myst_to_markdown("{glue}`missing`") == "`missing`"


def test_note_becomes_a_blockquote_and_labels_and_comments_go():
    md = myst_to_markdown("(my-label)=\n# Title\n% a comment\n\n:::{note}\nRemember {ref}`units <u>`.\n:::\n\nAfter.")
    assert md == "# Title\n\n> **Note**\n>\n> Remember units.\n\nAfter."
    titled = myst_to_markdown("```{admonition} Why it matters\nBecause.\n```")
    assert titled == "> **Why it matters**\n>\n> Because."


def test_folded_answers_are_dropped():
    text = textwrap.dedent("""\
        Question: how fast?

        :::{dropdown} Solution
        ANSWER-ONE
        :::

        ```{admonition} Answer
        :class: dropdown
        ANSWER-TWO
        ```

        ::::{tip}
        :class: dropdown tip
        ANSWER-THREE
        ::::
        Still here.""")
    md = myst_to_markdown(text)
    assert "ANSWER" not in md
    assert md == "Question: how fast?\n\nStill here."


def test_nested_directives_and_code_fences():
    text = "::::{tab-set}\n:::{tab-item} First\nOne {doc}`x`\n:::\n::::\n```python\nkeep {doc}`y`\n```"
    md = myst_to_markdown(text)
    assert "**First**" in md and "One x" in md and ":::" not in md
    assert "```python\nkeep {doc}`y`\n```" in md, "a code fence is copied as it is"
    assert myst_to_markdown("```{math}\na = b\n```") == "$$\na = b\n$$"


def test_myst_to_markdown_refuses_a_non_string():
    with pytest.raises(TypeError, match="text must be a str"):
        myst_to_markdown(["# a"])


# --------------------------------------------------------------------------------------------
# Slide types


def _types(cells) -> list[str]:
    assign_slide_types(cells)
    return [c.metadata["slideshow"]["slide_type"] for c in cells]


def test_headings_start_slides():
    cells = [new_markdown_cell("# Lab"), new_markdown_cell("text"), _code("a"), new_markdown_cell("## Part"),
             new_markdown_cell("### Step"), new_markdown_cell("#### small"), _code("b")]
    assert _types(cells) == ["slide", "-", "-", "slide", "subslide", "-", "-"]


def test_a_long_run_of_code_cells_is_split():
    cells = [new_markdown_cell("## Part"), *[_code(str(i)) for i in range(5)]]
    assert _types(cells) == ["slide", "-", "-", "subslide", "-", "subslide"]
    # the prose just before the third code cell goes with it
    cells = [new_markdown_cell("## Part"), _code("1"), _code("2"), new_markdown_cell("then"), _code("3")]
    assert _types(cells) == ["slide", "-", "-", "subslide", "-"]
    # a heading resets the count
    cells = [new_markdown_cell("## A"), _code("1"), _code("2"), new_markdown_cell("## B"), _code("3"), _code("4")]
    assert _types(cells) == ["slide", "-", "-", "slide", "-", "-"]


# --------------------------------------------------------------------------------------------
# to_slides


def _lab() -> nbformat.NotebookNode:
    return new_notebook(cells=[
        new_markdown_cell("# Roofline lab\n\nIntro with {doc}`the chapter <../chapters/02_gemm>`."),
        _code("SETUP_SOURCE", tags=["remove-cell"], out="SETUP_OUTPUT"),
        _code("SHOWN_SOURCE", out="SHOWN_OUTPUT"),
        _code("QUIET_SOURCE", tags=["remove-output"], out="QUIET_OUTPUT"),
        _code("HIDDEN_INPUT", tags=["hide-input"], out="OUTPUT_OF_HIDDEN"),
        _code("REMOVED_INPUT", tags=["remove-input"], out="OUTPUT_OF_REMOVED"),
        _code("NOTHING_LEFT", tags=["remove-input"]),
        new_markdown_cell("## Exercise\n\nHow fast?\n\n:::{dropdown} Solution\nTEACHER_ANSWER\n:::"),
        new_markdown_cell(":::{dropdown} Hint\nTEACHER_HINT\n:::"),
    ])


def test_tags_are_honoured_and_answers_dropped():
    nb = _lab()
    before = copy.deepcopy(nb)
    html = to_slides(nb, title="Roofline lab")
    for shown in ("SHOWN_SOURCE", "SHOWN_OUTPUT", "QUIET_SOURCE", "OUTPUT_OF_HIDDEN", "OUTPUT_OF_REMOVED",
                  "How fast?", "Intro with the chapter."):
        assert shown in html, shown
    for gone in ("SETUP_SOURCE", "SETUP_OUTPUT", "QUIET_OUTPUT", "HIDDEN_INPUT", "REMOVED_INPUT",
                 "NOTHING_LEFT", "TEACHER_ANSWER", "TEACHER_HINT", "{doc}"):
        assert gone not in html, gone
    assert nb == before, "to_slides changed the notebook it was given"


def test_headings_make_the_slides():
    found = _slides_of(to_slides(_lab(), title="Roofline lab"))
    # "# Roofline lab" + 2 code cells | 2 more code cells (split) | "## Exercise"
    assert len(found) == 3, [s[:80] for s in found]
    assert "Roofline lab" in found[0] and "SHOWN_SOURCE" in found[0] and "OUTPUT_OF_HIDDEN" in found[1]
    assert "Exercise" in found[2]


def test_a_title_slide_is_added_when_the_notebook_starts_without_a_heading():
    found = _slides_of(to_slides(new_notebook(cells=[_code("x = 1")]), title="Warm-up"))
    assert len(found) == 1 and "Warm-up" in found[0] and "x" in found[0]
    assert "<title>Warm-up slides</title>" in to_slides(new_notebook(cells=[]), title="Warm-up")


def test_reveal_is_pinned_on_jsdelivr():
    html = to_slides(_lab(), title="Roofline lab")
    prefix = f"https://cdn.jsdelivr.net/npm/reveal.js@{REVEAL_VERSION}"
    assert f'"{prefix}/dist/reveal.js"' in html and f'href="{prefix}/dist/theme/white.css"' in html
    assert "unpkg.com" not in html and "cdnjs.cloudflare.com" not in html
    assert re.search(r"var scroll = true", html), "reveal_scroll is not on"
    # the version nbconvert's reveal template is written for
    assert SlidesExporter().reveal_url_prefix.endswith(f"reveal.js@{REVEAL_VERSION}")
    for spec in slides.CDN_PACKAGES:
        assert f"https://cdn.jsdelivr.net/npm/{spec}/" in html, spec


def test_to_slides_refuses_bad_input():
    for bad in ({"cells": []}, None, "notebook.ipynb"):
        with pytest.raises(TypeError, match="nb must be an nbformat.NotebookNode"):
            to_slides(bad, title="x")
    with pytest.raises(TypeError, match="title must be a str"):
        to_slides(_lab(), title=None)
    with pytest.raises(ValueError, match="title must not be empty"):
        to_slides(_lab(), title="  ")


# --------------------------------------------------------------------------------------------
# The Sphinx extension


def test_setup_is_parallel_safe_and_listens_to_build_finished():
    events = []
    meta = slides.setup(SimpleNamespace(connect=lambda name, fn: events.append((name, fn))))
    assert meta["parallel_read_safe"] is True and meta["parallel_write_safe"] is True
    assert [name for name, _ in events] == ["build-finished"]


def test_the_book_registers_the_extension():
    cfg = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    assert "perfkit.book.slides" in cfg["sphinx"]["extra_extensions"]


def test_labs_and_their_decks():
    assert lab_docnames(["intro", "labs/02_b", "chapters/labs", "labs/01_a"]) == ["labs/01_a", "labs/02_b"]
    assert deck_path("/out/html", "labs/01_a") == Path("/out/html/slides/01_a.slides.html")


def _fake_app(tmp_path: Path, mode: str):
    (tmp_path / "src" / "labs").mkdir(parents=True)
    (tmp_path / "src" / "labs" / "01_demo.md").write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n  name: python3\n"
        "  display_name: Python 3\n---\n\n# Demo\n\n```{code-cell} ipython3\nprint('FROM_SOURCE')\n```\n",
        encoding="utf-8")
    cfg = SimpleNamespace(output_folder=str(tmp_path / "jupyter_execute"), execution_mode=mode,
                          execution_cache_path="")
    env = SimpleNamespace(mystnb_config=cfg, found_docs={"intro", "labs/01_demo"}, titles={},
                          doc2path=lambda d: str(tmp_path / "src" / f"{d}.md"))
    return SimpleNamespace(env=env, outdir=str(tmp_path / "html"))


def test_decks_come_from_the_executed_notebook(tmp_path):
    app = _fake_app(tmp_path, "force")
    executed = new_notebook(cells=[new_markdown_cell("# Demo"), _code("print(1)", out="EXECUTED_OUTPUT")])
    (tmp_path / "jupyter_execute" / "labs").mkdir(parents=True)
    nbformat.write(executed, tmp_path / "jupyter_execute" / "labs" / "01_demo.ipynb")
    nb, was_executed = lab_notebook(app, "labs/01_demo")
    assert was_executed and nb.cells[1].outputs[0].text == "EXECUTED_OUTPUT"
    [path] = write_decks(app)
    assert path == tmp_path / "html" / "slides" / "01_demo.slides.html"
    assert "EXECUTED_OUTPUT" in path.read_text(encoding="utf-8")


def test_without_an_executed_notebook_the_deck_comes_from_the_source(tmp_path, monkeypatch):
    app = _fake_app(tmp_path, "off")
    said = []
    monkeypatch.setattr(slides, "LOGGER", SimpleNamespace(info=lambda m: said.append(("info", m)),
                                                          warning=lambda m: said.append(("warning", m))))
    [path] = write_decks(app)
    html = path.read_text(encoding="utf-8")
    assert "FROM_SOURCE" in html and "<title>labs/01_demo slides</title>" in html
    assert [level for level, m in said if "has no executed notebook" in m] == ["info"], said
    assert all(level == "info" for level, _ in said), "a warning would fail the build (-W)"


# --------------------------------------------------------------------------------------------
# A tiny book built with the extension (slow)

TINY_LAB = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# Demo lab

Prose with a {doc}`link back <../intro>`.

```{code-cell} ipython3
:tags: [remove-cell]
print("HIDDEN" + "_SETUP")
```

```{code-cell} ipython3
print(6 * 7)
```

## Second part

:::{note}
Remember the units.
:::

```{code-cell} ipython3
:tags: [remove-input]
print("ONLY" + "_THE_OUTPUT")
```

:::{dropdown} Answer
TEACHER_ANSWER
:::
"""


def write_tiny_book(root: Path, execute: str = "force") -> Path:
    """A three-page book in ``root`` (intro, teach, labs/01_demo) with the slides extension."""
    (root / "labs").mkdir(parents=True, exist_ok=True)
    (root / "_config.yml").write_text(yaml.safe_dump({
        "title": "Slides demo", "author": "perfkit tests", "only_build_toc_files": True,
        "execute": {"execute_notebooks": execute}, "parse": {"myst_enable_extensions": ["colon_fence"]},
        "sphinx": {"extra_extensions": ["perfkit.book.slides"]}}), encoding="utf-8")
    (root / "_toc.yml").write_text(yaml.safe_dump({
        "format": "jb-book", "root": "intro",
        "chapters": [{"file": "teach", "sections": [{"file": "labs/01_demo"}]}]}), encoding="utf-8")
    (root / "intro.md").write_text("# Intro\n\nThe demo book.\n", encoding="utf-8")
    # a Markdown link to a file Sphinx does not know is a warning (-W): the teach page links the decks in HTML
    (root / "teach.md").write_text('# Teach\n\n<a href="slides/01_demo.slides.html">Slides of lab 1</a>\n',
                                   encoding="utf-8")
    (root / "labs" / "01_demo.md").write_text(TINY_LAB, encoding="utf-8")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("execute", ["force", "off"])
def test_tiny_book_builds_its_slides(tmp_path, execute):
    book = write_tiny_book(tmp_path / "book", execute)
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
    assert jb, "jupyter-book is not installed (pip install -r requirements.txt)"
    proc = subprocess.run([jb, "build", str(book), "--all", "-W", "-n", "--keep-going",
                           "--path-output", str(tmp_path / "out")],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:]
    deck = tmp_path / "out" / "_build" / "html" / "slides" / "01_demo.slides.html"
    assert deck.is_file(), proc.stdout[-4000:]
    html = deck.read_text(encoding="utf-8")
    assert html.count("<section") >= 4 and len(_slides_of(html)) == 2, "expected two slides (# and ##)"
    assert "Remember the units." in html and "link back" in html
    assert "HIDDEN_SETUP" not in html and "TEACHER_ANSWER" not in html
    if execute == "force":
        assert "ONLY_THE_OUTPUT" in html and re.search(r"<pre>42\s*</pre>", html), "the outputs are missing"
        assert "slides: labs/01_demo -> slides/01_demo.slides.html" in proc.stdout
    else:
        assert "ONLY_THE_OUTPUT" not in html and not re.search(r"<pre>42\s*</pre>", html)
        assert "has no executed notebook" in proc.stdout
