"""reveal.js slides of the workshop labs, written by the book's build.

A Sphinx extension (``sphinx: extra_extensions: [perfkit.book.slides]`` in ``_config.yml``): when
the html build has finished without error, the executed notebook of every page under ``labs/``
(where myst-nb writes it, ``<build>/jupyter_execute/labs/NN_name.ipynb``) becomes the deck
``<outdir>/slides/NN_name.slides.html``, made by nbconvert's reveal.js exporter. A lab without an
executed notebook (execution off) is converted from its source, without outputs.

:func:`to_slides` is the conversion: hidden cells and folded answers are dropped, headings start
slides, a long run of code cells is split so nothing overflows a projector, and MyST-only syntax
(roles, directives) becomes plain Markdown (:func:`myst_to_markdown`). A deck loads reveal.js,
require.js, jQuery and MathJax from jsdelivr at pinned versions when it is opened.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping

import jupytext
import nbformat
from jupyter_cache import get_cache
from myst_nb.sphinx_ext import OUTPUT_FOLDER
from nbconvert import SlidesExporter
from sphinx.application import Sphinx
from sphinx.util import logging

from .._version import __version__

LOGGER = logging.getLogger(__name__)

#: The reveal.js nbconvert 7's reveal template is written for (its default ``reveal_url_prefix``).
REVEAL_VERSION = "4.0.2"
JSDELIVR_NPM = "https://cdn.jsdelivr.net/npm/"
REVEAL_URL_PREFIX = f"{JSDELIVR_NPM}reveal.js@{REVEAL_VERSION}"
#: The npm packages (name@version) a deck loads from jsdelivr, besides MathJax and Mermaid (only
#: needed for math and diagrams): what a hermetic browser test must answer.
CDN_PACKAGES = (f"reveal.js@{REVEAL_VERSION}", "jquery@3.7.1", "requirejs@2.3.7")
EXPORTER_URLS = {
    "reveal_url_prefix": REVEAL_URL_PREFIX,
    "jquery_url": f"{JSDELIVR_NPM}jquery@3.7.1/dist/jquery.min.js",
    "require_js_url": f"{JSDELIVR_NPM}requirejs@2.3.7/require.js",
    # MathJax 2, as the book (the template's slide-change hook calls MathJax.Hub)
    "mathjax_url": f"{JSDELIVR_NPM}mathjax@2.7.9/MathJax.js?config=TeX-AMS-MML_HTMLorMML",
    "mermaid_js_url": f"{JSDELIVR_NPM}mermaid@11.10.0/dist/mermaid.esm.min.mjs",
    "jupyter_widgets_base_url": JSDELIVR_NPM,
    "widget_renderer_url": f"{JSDELIVR_NPM}@jupyter-widgets/html-manager@1.0.6/dist/embed-amd.js",
}
#: A slide (or sub-slide) holds at most this many code cells; the next one starts a sub-slide.
MAX_CODE_CELLS = 2
LABS_PREFIX = "labs/"

# --------------------------------------------------------------------------------------------
# MyST → plain Markdown

_DIRECTIVE = re.compile(r"^\s{0,3}(?P<fence>:{3,}|`{3,}|~{3,})\{(?P<name>[^}\s]+)\}[ \t]*(?P<arg>.*)$")
_CODE_FENCE = re.compile(r"^\s{0,3}(?P<fence>`{3,}|~{3,})")
_OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):(?P<value>.*)$")
_ROLE = re.compile(r"\{(?P<name>[A-Za-z][\w:+.-]*)\}`(?P<content>[^`]+)`")
_TITLED = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
_LABEL = re.compile(r"^\s*\([^()\s]+\)=\s*$")
_COMMENT = re.compile(r"^\s*%")
_HEADING = re.compile(r"^(#{1,6})\s")
#: Directives that fold their content: the teacher's answers, never projected.
FOLDED = {"dropdown", "toggle"}
ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention", "danger", "error",
               "seealso", "admonition"}
#: Directives whose argument is a path, not text (dropped with it).
PATH_ARGUMENT = {"figure", "image", "include", "literalinclude", "glue:figure", "bibliography"}


def _closing(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing ``fence`` at or after ``start`` (``len(lines)`` if none)."""
    for j in range(start, len(lines)):
        s = lines[j].strip()
        if len(s) >= len(fence) and set(s) == {fence[0]}:
            return j
    return len(lines)


def _options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive's options (``:key: value`` lines or a ``---`` YAML block) and the rest of its body."""
    opts: dict[str, str] = {}
    if body and body[0].strip() == "---":
        end = next((k for k in range(1, len(body)) if body[k].strip() == "---"), None)
        if end is not None:
            for line in body[1:end]:
                key, _, value = line.partition(":")
                opts[key.strip()] = value.strip()
            return opts, body[end + 1:]
    k = 0
    while k < len(body) and (m := _OPTION.match(body[k])):
        opts[m["key"]] = m["value"].strip()
        k += 1
    return opts, body[k:]


def _role(m: re.Match, glue: Mapping[str, str]) -> str:
    name, content = m["name"], m["content"]
    if name == "math":
        return f"${content}$"
    if name == "glue" or name.startswith("glue:"):
        key, _, spec = content.partition(":")
        value = glue.get(key.strip())
        if value is None:
            return f"`{key.strip()}`"
        try:
            return format(float(value), spec) if spec else value
        except ValueError:
            return value
    titled = _TITLED.match(content)
    if titled:
        return titled["text"] or titled["target"]
    return content.rstrip("/").rsplit("/", 1)[-1] if name == "doc" else content  # a page: its file name


def _directive(name: str, arg: str, body: list[str], glue: Mapping[str, str]) -> list[str]:
    opts, body = _options(body)
    if name in FOLDED or "dropdown" in opts.get("class", "").split():
        return []
    if name in ("code", "code-block", "sourcecode", "code-cell"):
        return [f"```{arg}", *body, "```"]
    if name == "math":
        return ["$$", *body, "$$"]
    if name in ("include", "literalinclude", "bibliography", "glue:figure", "glue"):
        return []
    inner = myst_to_markdown("\n".join(body), glue=glue).splitlines()
    if name in ADMONITIONS:
        title = (arg or "Note") if name == "admonition" else name.capitalize()
        first = [] if name == "admonition" or not arg else [arg, ""]
        quoted = [f"> {line}".rstrip() for line in first + inner]
        return ["", f"> **{title}**", ">", *quoted, ""]
    head = [f"**{arg}**", ""] if arg and name not in PATH_ARGUMENT else []
    return ["", *head, *inner, ""]


def myst_to_markdown(text: str, *, glue: Mapping[str, str] | None = None) -> str:
    """``text`` (a MyST Markdown cell) as Markdown nbconvert renders: roles become their text
    (``{doc}`x <y>``` → ``x``, ``{doc}`/a/b``` → ``b``; ``{math}`` → ``$…$``; ``{glue}`` → the
    glued value from ``glue``), admonitions a blockquote, folded blocks (``dropdown``, ``:class:
    dropdown``) nothing, other directives their content; ``(label)=`` and ``%`` comment lines go.
    Code fences are kept as they are."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    glue = glue or {}
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        fence = None if directive else _CODE_FENCE.match(line)
        if directive:
            end = _closing(lines, i + 1, directive["fence"])
            out += _directive(directive["name"], directive["arg"].strip(), lines[i + 1:end], glue)
            i = end + 1
        elif fence:
            end = _closing(lines, i + 1, fence["fence"])
            out += lines[i:end + 1]
            i = end + 1
        else:
            if not (_LABEL.match(line) or _COMMENT.match(line)):
                out.append(_ROLE.sub(lambda m: _role(m, glue), line))
            i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")


# --------------------------------------------------------------------------------------------
# A notebook → a reveal.js deck


def glued_values(nb: nbformat.NotebookNode) -> dict[str, str]:
    """{name: plain-text value} of every value the notebook glued (myst-nb's ``glue``)."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            text = next((v for k, v in out.get("data", {}).items() if k.endswith("text/plain")), None)
            if name and text is not None:
                found[name] = "".join(text) if isinstance(text, list) else str(text)
    return found


def _tags(cell: Any) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []) or [])


def _visible_cells(nb: nbformat.NotebookNode) -> list:
    """The cells a deck shows, tags applied (``remove-cell``, ``remove-output``, ``remove-input``,
    ``hide-input``) and MyST cleaned; cells left empty are dropped."""
    glue, cells = glued_values(nb), []
    for cell in nb.cells:
        tags = _tags(cell)
        if "remove-cell" in tags:
            continue
        if cell.cell_type == "markdown":
            cell.source = myst_to_markdown(cell.source, glue=glue)
            if not cell.source.strip():
                continue
        elif cell.cell_type == "code":
            if "remove-output" in tags:
                cell.outputs = []
            if tags & {"remove-input", "hide-input"}:
                cell.metadata["transient"] = {"remove_source": True}
                if not cell.outputs:
                    continue
        cells.append(cell)
    return cells


def _heading_level(source: str) -> int:
    m = _HEADING.match(source.lstrip("\n"))
    return len(m.group(1)) if m else 0


def _set_slide_type(cell: Any, slide_type: str) -> None:
    cell.metadata.setdefault("slideshow", {})["slide_type"] = slide_type


def assign_slide_types(cells: list, max_code_cells: int = MAX_CODE_CELLS) -> None:
    """Give each cell its ``slideshow.slide_type``: ``#``/``##`` headings ``slide``, ``###``
    ``subslide``, the rest ``-``; a code cell beyond ``max_code_cells`` in one (sub)slide starts a
    ``subslide``, together with the markdown cells just before it."""
    in_section, prose_start = 0, None
    for i, cell in enumerate(cells):
        _set_slide_type(cell, "-")
        if cell.cell_type == "markdown":
            level = _heading_level(cell.source)
            if level in (1, 2, 3):
                _set_slide_type(cell, "slide" if level < 3 else "subslide")
                in_section, prose_start = 0, None
            elif prose_start is None:
                prose_start = i
            continue
        if cell.cell_type == "code":
            if in_section >= max_code_cells:
                _set_slide_type(cells[i if prose_start is None else prose_start], "subslide")
                in_section = 0
            in_section += 1
        prose_start = None


def to_slides(nb: nbformat.NotebookNode, *, title: str) -> str:
    """The notebook ``nb`` as a reveal.js deck (the HTML of one page), titled ``title``.

    ``nb`` is not changed. Its hidden cells and folded answers are left out (:func:`_visible_cells`),
    slides follow its headings (:func:`assign_slide_types`); a title slide is added when it does
    not start with a ``#``/``##`` heading."""
    if not isinstance(nb, nbformat.NotebookNode) or not isinstance(nb.get("cells"), list):
        raise TypeError(f"nb must be an nbformat.NotebookNode (a notebook, nbformat.read(..., as_version=4)), "
                        f"got {type(nb).__name__}")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    if not title.strip():
        raise ValueError("title must not be empty")
    nb = copy.deepcopy(nb)
    cells = _visible_cells(nb)
    if not cells or cells[0].cell_type != "markdown" or _heading_level(cells[0].source) not in (1, 2):
        cells.insert(0, nbformat.v4.new_markdown_cell(f"# {title}"))
    assign_slide_types(cells)
    nb.cells = cells
    nb.metadata["title"] = title
    exporter = SlidesExporter(reveal_theme="white", reveal_scroll=True, **EXPORTER_URLS)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    return body


# --------------------------------------------------------------------------------------------
# The Sphinx extension


def lab_docnames(docnames: Iterable[str]) -> list[str]:
    """The documents that are labs (docname under ``labs/``), sorted."""
    return sorted(d for d in docnames if d.startswith(LABS_PREFIX))


def deck_path(outdir: Path | str, docname: str) -> Path:
    """Where the deck of lab ``docname`` goes: ``<outdir>/slides/<name>.slides.html``."""
    return Path(outdir) / "slides" / f"{PurePosixPath(docname).name}.slides.html"


def _was_executed(nb: nbformat.NotebookNode) -> bool:
    code = [c for c in nb.cells if c.cell_type == "code"]
    return not code or any(c.get("execution_count") is not None or c.get("outputs") for c in code)


def lab_notebook(app: Sphinx, docname: str) -> tuple[nbformat.NotebookNode, bool]:
    """(the notebook of lab ``docname``, whether it is the executed one). The executed one is the
    file myst-nb wrote to its output folder (outputs merged from the jupyter-cache in cache mode,
    where myst-nb writes it without them); else the source, read with jupytext."""
    cfg = getattr(app.env, "mystnb_config", None)
    folder = Path(cfg.output_folder) if cfg is not None and cfg.output_folder else (
        Path(app.outdir).parent / OUTPUT_FOLDER)
    path = folder.joinpath(*f"{docname}.ipynb".split("/"))
    mode = cfg.execution_mode if cfg is not None else "off"
    if path.is_file() and mode != "off":
        nb = nbformat.read(path, as_version=4)
        if mode == "cache" and cfg.execution_cache_path:
            try:
                nb = get_cache(str(cfg.execution_cache_path)).merge_match_into_notebook(nb)[1]
            except KeyError:
                pass  # not in the cache: as written
        if _was_executed(nb):
            return nb, True
    return jupytext.read(app.env.doc2path(docname)), False


def write_decks(app: Sphinx) -> list[Path]:
    """Write the deck of every lab of the build; return their paths."""
    written = []
    for docname in lab_docnames(app.env.found_docs):
        nb, executed = lab_notebook(app, docname)
        if not executed:
            LOGGER.info(f"slides: {docname} has no executed notebook (execution off?): its deck is made "
                        f"from the source, without outputs")
        title = app.env.titles[docname].astext() if docname in app.env.titles else docname
        path = deck_path(app.outdir, docname)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_slides(nb, title=title), encoding="utf-8")
        LOGGER.info(f"slides: {docname} -> {path.relative_to(app.outdir).as_posix()}")
        written.append(path)
    return written


def _on_build_finished(app: Sphinx, exception: BaseException | None) -> None:
    if exception is None and app.builder.name == "html":
        write_decks(app)


def setup(app: Sphinx) -> dict:
    """Register the extension: decks are written when the html build has finished."""
    app.connect("build-finished", _on_build_finished)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
