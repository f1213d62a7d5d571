"""What every chapter gives its reader: problems with folded solutions and a self-check
(perfkit.book.problems), interactive figures that move without a kernel (perfkit.interactive), the
book-wide verdict table (perfkit.book.scorecard), and code that fits the page.

Chapter-specific checks live in tests/book/<chapter>/test_<chapter>_reader.py.
"""

from __future__ import annotations

import json
import importlib
import re
from pathlib import Path

import pandas as pd
import pytest

import perfkit as pk
from perfkit.book import problems as exercises
from perfkit.book.problems import Check, Exercise

from testkit import REPO
CHAPTERS = sorted(p.stem for p in (REPO / "chapters").glob("*.md"))
#: The workshop's labs, which have a problem each (perfkit.book.workshop.problems).
LABS = sorted(f"labs/{p.stem}" for p in (REPO / "labs").glob("*.md"))
MAX_CODE_LINE = 88


def _source(chapter: str) -> str:
    return (REPO / "chapters" / f"{chapter}.md").read_text(encoding="utf-8")


def _code_lines(chapter: str):
    inside = False
    for n, line in enumerate(_source(chapter).splitlines(), 1):
        if re.match(r"^```\{code-cell\}", line):
            inside = True
        elif line.startswith("```"):
            inside = False
        elif inside:
            yield n, line


# --------------------------------------------------------------------------------------------
# Code that fits the page


def _visible_cells(text: str):
    """(first line number, source) of every code cell the page shows: not tagged remove-cell
    or remove-input (the Colab cell, hidden checks)."""
    for m in re.finditer(r"^```\{code-cell\}[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        body = m.group(1)
        header = re.match(r"(?:---\n.*?\n---\n|(?::[^\n]*\n)+)", body, flags=re.S)
        tags = header.group(0) if header else ""
        if "remove-cell" in tags or "remove-input" in tags:
            continue
        yield text[: m.start()].count("\n") + 2, body[len(tags):]


READER_CELLS = ["intro", *CHAPTERS]


def _page_source(name: str) -> str:
    return (REPO / f"{name}.md").read_text(encoding="utf-8") if name == "intro" else _source(name)


@pytest.mark.parametrize("chapter", READER_CELLS)
def test_visible_cells_read_as_experiments(chapter):
    """No asserts, no None plumbing, no printed DataFrames in the cells a reader sees: checks live
    in hidden cells (remove-cell) or in tests, functions return what to show (a figure, a note, a
    table)."""
    bad = []
    for line, body in _visible_cells(_page_source(chapter)):
        code = "\n".join(re.sub(r"#.*$", "", ln) for ln in body.splitlines())
        for pattern, why in ((r"^\s*assert\b", "an assert"), (r"\bis (not )?None\b", "None plumbing"),
                             (r"\.to_string\(", "a DataFrame printed as text (use pk.table)")):
            if re.search(pattern, code, flags=re.M):
                bad.append((line, why))
    assert not bad, f"{chapter}.md: visible cells (first line, problem): {bad}"


@pytest.mark.parametrize("chapter", READER_CELLS)
def test_figure_calls_are_the_cells_result(chapter):
    """A figure shows only as a cell's result: never assigned, never silenced with ``;``."""
    bad = []
    for line, body in _visible_cells(_page_source(chapter)):
        for k, ln in enumerate(body.splitlines()):
            if re.search(r"\bpk\.(plots\.plot_\w+|plot_roofline)\(", ln) and (
                    re.match(r"\s*\w+\s*=", ln) or ln.rstrip().endswith(";")):
                bad.append(line + k)
    assert not bad, f"{chapter}.md: figure calls assigned or ending in ';' (lines): {bad}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_code_lines_fit_the_page(chapter):
    long = [(n, len(line)) for n, line in _code_lines(chapter) if len(line) > MAX_CODE_LINE]
    assert not long, f"chapters/{chapter}.md: code lines over {MAX_CODE_LINE} characters (line, length): {long}"



@pytest.mark.parametrize("page", READER_CELLS)
def test_no_prose_line_starts_with_a_percent_sign(page):
    """MyST reads a line that starts with ``%`` as a comment and drops it, so a sentence wrapped
    before "%" (``99.6\n% of ...``) ends mid-way on the page."""
    inside, dropped = False, []  # inside a ``` fence (code cells, code blocks)
    for n, line in enumerate(_page_source(page).splitlines(), 1):
        if line.startswith("```"):
            inside = not inside
        elif line.startswith("%") and not inside:
            dropped.append(n)
    assert not dropped, f"{page}.md: prose lines starting with '%' (MyST drops them): {dropped}"


# --------------------------------------------------------------------------------------------
# Exercises


def test_every_chapter_has_problems():
    have = {ex.chapter for ex in exercises.all_exercises()}
    assert set(CHAPTERS) <= have, f"chapters without exercises: {sorted(set(CHAPTERS) - have)}"
    for chapter in CHAPTERS:
        assert len(exercises.all_exercises(chapter)) >= 2, f"{chapter} has fewer than two problems"


ALL = exercises.all_exercises()


@pytest.mark.parametrize("ex", ALL, ids=[e.id for e in ALL])
def test_exercise_answers_itself(ex: Exercise):
    assert re.fullmatch(r"[a-z]+-\d+", ex.id), ex.id
    assert ex.chapter in CHAPTERS or ex.chapter in LABS, f"{ex.id}: unknown chapter or lab {ex.chapter}"
    assert ex.question.strip() and ex.solve is not None
    value = ex.answer()
    right = exercises.check(ex.id, value)
    assert right.status == "right" and bool(right), right
    assert exercises.check(ex.id, None).status == "unanswered"
    assert ex.answer_text() and ex.answer_text() == ex.answer_text()  # deterministic
    if ex.choices:
        others = [c for c in ex.choices if c.lower().replace(" ", "") != str(value).lower().replace(" ", "")]
        assert others, f"{ex.id}: a choice question needs at least one wrong choice"
        assert exercises.check(ex.id, others[0]).status == "wrong"
        assert exercises.check(ex.id, "certainly not a choice").status == "wrong"
    else:
        far = float(value) * 3 + 7
        assert exercises.check(ex.id, far).status == "wrong"
        assert exercises.check(ex.id, "not a number").status == "wrong"
        for solve, why in ex.mistakes:
            slip = exercises.check(ex.id, solve())
            assert slip.status in ("wrong", "close") and why in slip.message, (ex.id, slip)


def test_check_statuses_and_messages():
    ex = ALL[0]
    assert isinstance(exercises.check(ex.id, None), Check)
    assert set(exercises.STATUSES) == {"right", "close", "wrong", "unanswered"}
    assert "right" in exercises.check(ex.id, ex.answer())._repr_html_()


def test_close_answers_are_close():
    numeric = [ex for ex in ALL if not ex.choices and ex.close_tol > ex.rel_tol and ex.answer() != 0]
    assert numeric, "no numeric exercise with a 'close' band"
    for ex in numeric:
        nearly = float(ex.answer()) * (1 + (ex.rel_tol + ex.close_tol) / 2)
        slips = [float(solve()) for solve, _ in ex.mistakes]
        if any(abs(nearly - s) <= max(ex.rel_tol, 1e-9) * abs(s) for s in slips):
            continue  # that near answer is a known slip, explained as such
        assert exercises.check(ex.id, nearly).status == "close", ex.id


def test_bad_exercise_ids():
    with pytest.raises(LookupError, match="known"):
        exercises.check("nope-1", 3)
    with pytest.raises(TypeError, match="exercise_id"):
        exercises.check(3, 3)
    with pytest.raises(LookupError, match="chapter"):
        exercises.all_exercises("99_nothing")


def test_exercise_table_hides_answers():
    table = exercises.table()
    assert list(table.columns) == ["id", "chapter", "question", "unit"]
    assert len(table) == len(ALL)


_CHECK = re.compile(r'problems\.check\("([a-z]+-\d+)", None\)')
_SOLUTION = re.compile(r"^:::\{dropdown\} Solution\s*$(.*?)^:::\s*$", re.S | re.M)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_problems_have_folded_solutions_with_the_computed_answer(chapter):
    text = _source(chapter)
    problems = text[text.find("\n## Problems"):] if "\n## Problems" in text else ""
    assert problems, f"chapters/{chapter}.md has no '## Problems' section"
    ids = _CHECK.findall(problems)
    want = [ex.id for ex in exercises.all_exercises(chapter)]
    assert ids == want, f"{chapter}: check cells {ids}, exercises {want} (same ids, same order)"
    starts = [m.start() for m in _CHECK.finditer(problems)] + [len(problems)]
    for ex_id, a, b in zip(ids, starts, starts[1:]):
        block = _SOLUTION.search(problems[a:b])
        assert block, f"{chapter}: problem {ex_id} has no ':::{{dropdown}} Solution' block after its check cell"
        answer = exercises.get(ex_id).answer_text()
        assert answer in block.group(1), (f"{chapter}: the solution of {ex_id} does not state the computed "
                                          f"answer {answer!r}")


# --------------------------------------------------------------------------------------------
# Interactive figures


def _interactive_modules() -> dict:
    """Chapter file → its folder's interactive module (``perfkit.book.<folder>.interactive``)."""
    from perfkit.book import CHAPTERS as FOLDERS

    return {stem: importlib.import_module(f"perfkit.book.{folder}.interactive") for folder, stem in FOLDERS.items()}


def _figures():
    return [(chapter, name, build) for chapter, module in _interactive_modules().items()
            for name, build in module.FIGURES.items()]


def test_every_chapter_has_an_interactive_figure():
    modules = _interactive_modules()
    assert set(modules) == set(CHAPTERS)
    empty = [c for c, m in modules.items() if not m.FIGURES]
    assert not empty, f"chapters without an interactive figure: {empty}"
    for chapter, module in modules.items():
        calls = re.findall(r"(\w+)\.interactive\.(\w+)\(", _source(chapter))
        assert calls, f"chapters/{chapter}.md shows no interactive figure (<its folder>.interactive.<fn>(...))"
        for _, fn in calls:
            assert hasattr(module, fn), (chapter, fn)


@pytest.mark.parametrize("chapter,name,build", _figures(), ids=[f"{c}:{n}" for c, n, _ in _figures()])
def test_interactive_figure(chapter, name, build):
    from perfkit.book.interactive import InteractiveFigure, PLOTLY_JS_URL
    from perfkit.book.interactive import MAX_HTML_BYTES, html_bytes

    fig = build()
    assert isinstance(fig, InteractiveFigure)
    assert len(fig.states) >= 2, f"{chapter}:{name} has nothing to move"
    size = html_bytes(fig)
    assert size < MAX_HTML_BYTES, f"{chapter}:{name} is {size} bytes of HTML (limit {MAX_HTML_BYTES})"
    page = fig.to_html()
    assert PLOTLY_JS_URL in page and f'id="{fig.name}"' in page and "aria-label" in page
    spec = json.loads(fig.figure.to_json())
    from testkit import heading_text

    title = heading_text(fig)  # its title and the source footnote under it
    assert re.search(r"(live on|recorded on|published by|model of|modelled|no recording)", title, re.I), (
        f"{chapter}:{name}: the figure does not say where its numbers come from: {title!r}")
    controls = [s["args"] for slider in spec["layout"].get("sliders", []) for s in slider["steps"]]
    controls += [b["args"] for menu in spec["layout"].get("updatemenus", []) for b in menu["buttons"]]
    distinct = {json.dumps(args, sort_keys=True) for args in controls}
    assert len(distinct) == len(controls), f"{chapter}:{name}: two states show the same thing"


def test_figure_wrapper_refuses_bad_input():
    import plotly.graph_objects as go

    from perfkit.book.interactive import InteractiveFigure, State, with_slider

    with pytest.raises(TypeError, match="figure"):
        InteractiveFigure({"data": []}, "a long enough description here", "x")
    with pytest.raises(ValueError, match="alt"):
        InteractiveFigure(go.Figure(), "short", "x")
    with pytest.raises(ValueError, match="name"):
        InteractiveFigure(go.Figure(), "a long enough description here", "Bad Name")
    trace = [go.Scatter(x=[1, 2], y=[1, 2])]
    with pytest.raises(ValueError, match="at least two"):
        with_slider(trace, [State("a", [{"y": [1, 2]}])], prefix="")
    with pytest.raises(ValueError, match="same"):
        with_slider(trace, [State("a", [{"y": [1, 2]}]), State("b", [{"x": [1, 2]}])], prefix="")
    with pytest.raises(ValueError, match="traces"):
        with_slider(trace, [State("a", [{"y": [1]}, {"y": [2]}]), State("b", [{"y": [1]}, {"y": [2]}])],
                    prefix="")
    with pytest.raises(ValueError, match="active"):
        with_slider(trace, [State("a", [{"y": [1, 2]}]), State("b", [{"y": [2, 1]}])], prefix="", active=5)


def test_rounded_keeps_the_page_small():
    from perfkit.book.interactive import rounded

    assert rounded([1234567.0, 0.000123456, float("nan"), None, "x", 0]) == [1234600.0, 0.00012346, None,
                                                                            None, "x", 0.0]


# --------------------------------------------------------------------------------------------
# The book-wide verdict table


@pytest.mark.slow  # every chapter's verdicts: seconds
def test_book_verdict_table():
    table = pk.book.scorecard.book_table()
    assert list(table.columns) == ["chapter", "title", "rule", "source", "claim", "then", "now", "unit",
                                   "verdict", "where", "evidence", "now_from"]
    assert set(table["unit"]) <= {"×", "%", "MB"}  # one unit per row, named in its own column
    numbers = table.loc[table["then"] != "—", "then"]
    assert numbers.str.fullmatch(r"[\d.,]+").all(), f"then/now carry no unit of their own: {list(numbers)}"
    assert set(table["chapter"]) == {"02_gemm", "03_fully_connected", "04_recurrent", "05_convolutions",
                                     "06_memory_limited", "07_transformers", "08_communication"}
    assert set(table["verdict"]) <= set(pk.book.verdict.VERDICTS)
    assert set(table["evidence"]) <= {"measured", "published", "model"}, "no rule is left without evidence"
    # "now" is a dash exactly where nothing rests under it; a prediction says so in its verdict.
    assert ((table["now"] == "—") == (table["verdict"] == "no data yet")).all()
    assert (table["verdict"].str.startswith("predicted: ") == (table["evidence"] == "model")).all()
    assert (table["now_from"] != "").all()
    html = pk.book.scorecard.book_table_html(table)
    for chapter in table["chapter"].unique():
        assert f'href="chapters/{chapter}.html#verdict"' in html
    assert html.count('<tr class="evidence-') == len(table) and html.count("<tr>") == 1  # the header
    assert "<th>Now rests on</th>" in html
    for kind in set(table["evidence"]):
        assert f'<tr class="evidence-{kind}">' in html
    with pytest.raises(ValueError, match="columns"):
        pk.book.scorecard.book_table_html(pd.DataFrame({"rule": ["x"]}))


@pytest.mark.slow  # every chapter's verdicts: seconds
def test_book_summary_counts_by_evidence():
    table = pk.book.scorecard.book_table()
    n = len(table)
    counts = table["evidence"].value_counts()
    text = pk.book.scorecard.book_summary(table)
    assert text.startswith(f"{n} rules across 7 chapters: {counts.get('measured', 0)} measured on our GPUs, "
                           f"{counts.get('published', 0)} published (")
    assert f"{counts.get('model', 0)} predicted by the model" in text
    then = int((table["then"] != "—").sum())
    assert f"{then} also have a “then” from 2015–2019" in text
    ours = table.assign(now=["1.50"] + ["—"] * (n - 1), verdict=["holds"] + ["no data yet"] * (n - 1),
                        evidence=["measured"] + [""] * (n - 1), now_from=["ours, recorded on H100-SXM on 2026-01-01"] + [""] * (n - 1))
    text = pk.book.scorecard.book_summary(ours)
    assert "1 measured on our GPUs, 0 published (none), 0 predicted by the model" in text
    assert f"{n - 1} with no evidence yet" in text and "measured or published, 1 hold, 0 weaker, 0 gone" in text
    with pytest.raises(ValueError, match="columns"):
        pk.book.scorecard.book_summary(pd.DataFrame({"rule": ["x"]}))


# --------------------------------------------------------------------------------------------
# No raw warnings in a chapter's output


def test_a_noisy_sweep_prints_a_note_not_a_warning(capsys, recwarn):
    import warnings

    from perfkit.experiments.measure import sweep
    from perfkit.timing import NoiseWarning

    def measure(i):  # a point may time several things: it counts once
        warnings.warn("IQR 40 % of the median", NoiseWarning)
        warnings.warn("only 3 samples", NoiseWarning)
        return {"i": i}

    frame = sweep(range(3), measure, progress=False, desc="demo")
    assert len(frame) == 3
    assert not [w for w in recwarn if issubclass(w.category, NoiseWarning)]
    out = capsys.readouterr().out
    assert out.startswith("Noisy timings: 3 of 3 demo points had noisy timings") and "/" not in out.split("(")[0]
