"""The workshop plans and the teaching page: minutes add up, every lab, experiment and problem exists."""

from __future__ import annotations

import re

import pytest
import yaml

from perfkit.book import problems, workshop
from perfkit.book.workshop import labs, plan
from perfkit.experiments import registry
from testkit import REPO

TEACH = (REPO / "teach.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(workshop.PLANS))
def test_blocks_add_up_to_the_plan(name):
    blocks = workshop.PLANS[name]
    assert sum(b.minutes for b in blocks) == plan.LENGTHS[name]
    table = workshop.timetable(name)
    assert list(table.columns) == ["start", "minutes", "block", "lab"]
    assert table["minutes"].sum() == plan.LENGTHS[name] and table["start"].iloc[0] == "09:00"
    assert all(b.lab is None or b.lab in workshop.LABS for b in blocks)
    assert {b.lab for b in blocks if b.lab} == set(workshop.LABS)  # every lab is run
    assert any(b.is_break for b in blocks)


def test_timetable_clock_and_bad_plan():
    table = workshop.timetable("3-hour", start="13:30")
    assert list(table["start"]) == ["13:30", "14:05", "14:55", "15:05", "15:45"]
    with pytest.raises(ValueError, match="plan must be one of"):
        workshop.timetable("2-hour")


def test_check_plan_refuses_a_wrong_total_or_an_unknown_lab():
    with pytest.raises(ValueError, match="add up to 180 minutes, not 181"):
        plan.check_plan(workshop.THREE_HOUR, 181)
    with pytest.raises(ValueError, match="labs that do not exist"):
        plan.check_plan((workshop.Block("x", 10, "labs/99_none"),), 10)


def test_every_assigned_problem_has_an_answer():
    ids = workshop.assigned_problems()
    assert {"lab-1", "lab-2", "lab-3", "lab-4", "gemm-1"} <= set(ids)
    for i in ids:
        assert problems.get(i).answer_text()


def test_lab_problems_answers():
    assert problems.answer("lab-1") == 226  # 4096·N/(4096 + 2N) ≥ 65/0.32 from N = 226
    assert problems.answer("lab-2") == 1281  # 4 tile rows × 10 columns fill 40 SMs; one column more
    assert round(problems.answer("lab-3")) == 238  # 64 MiB at 288 GB/s + 5 µs
    assert round(problems.answer("lab-4"), 1) == 20.6
    assert problems.check("lab-2", 1280).status == "wrong"


def test_labs_are_pages_under_the_teaching_page():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf-8"))
    entry = next(c for c in toc["chapters"] if c.get("file") == "teach")
    assert [s["file"] for s in entry["sections"]] == list(workshop.LABS)
    for lab in workshop.LABS:
        assert (REPO / f"{lab}.md").is_file() and (REPO / f"{lab}.ipynb").is_file(), lab


@pytest.mark.parametrize("lab", list(workshop.LABS))
def test_a_lab_runs_what_the_plan_says(lab):
    """plan.LIVE is the truth about the labs: each lab's workshop.live(...) calls, in order."""
    text = (REPO / f"{lab}.md").read_text(encoding="utf-8")
    assert tuple(re.findall(r'workshop\.live\("(\w+)", spec\)', text)) == workshop.LIVE[lab]
    assert "workshop.start()" in text, f"{lab}: its first cell does not calibrate"
    assert f"# Lab {lab.split('/')[1][:2].lstrip('0')}: {workshop.LABS[lab]}" in text
    for name in workshop.LIVE[lab]:
        assert registry.get(name) and name in labs.QUICK


def test_teaching_page_follows_the_plan():
    """Each block of the 3-hour plan is a heading with its minutes, in order, with its lab linked."""
    blocks = [b for b in workshop.THREE_HOUR]
    headings = re.findall(r"^### (.+) \((\d+) min\)$", TEACH, flags=re.M)
    want = [(f"Block {n}: {b.title}" if not b.is_break else b.title, str(b.minutes))
            for n, b in zip(_numbers(blocks), blocks)]
    assert headings == want
    for b in blocks:
        if b.lab:
            assert f"{{doc}}`{b.lab}`" in TEACH
    for i in workshop.assigned_problems():
        if not i.startswith("lab-"):
            assert f"`{i}`" in TEACH, f"the teaching page does not assign {i}"


def test_teaching_page_describes_each_block_of_the_one_day_variant():
    three = {b.title for b in workshop.THREE_HOUR}
    for b in workshop.ONE_DAY:
        if b.title not in three and not b.is_break:
            assert f"**{b.title} ({b.minutes} min)**" in TEACH, f"the one-day block {b.title!r} is not described"


def _numbers(blocks):
    n, out = 0, []
    for b in blocks:
        n += not b.is_break
        out.append(n)
    return out


def test_teaching_page_links_each_lab_in_colab_and_its_slides():
    for lab in workshop.LABS:
        name = lab.split("/")[1]
        assert f'href="slides/{name}.slides.html"' in TEACH


#: Characters of a code line that fit a slide of the labs' decks (reveal.js at 960 px, code at 20 px).
SLIDE_CODE_CHARS = 72


@pytest.mark.parametrize("lab", list(workshop.LABS))
def test_lab_code_fits_a_slide(lab):
    import jupytext

    nb = jupytext.read(REPO / f"{lab}.md")
    shown = [c for c in nb.cells if c.cell_type == "code" and "remove-cell" not in c.metadata.get("tags", [])]
    wide = [line for c in shown for line in c.source.splitlines() if len(line) > SLIDE_CODE_CHARS]
    assert not wide, f"{lab}: code lines wider than a slide ({SLIDE_CODE_CHARS} characters): {wide}"


def test_the_decoding_pitfall_states_the_memory_the_run_needs():
    """Block 4's pitfall and lab 4 say 6 GB: what decode_steps' quick run refuses below, on a GPU."""
    import perfkit as pk
    from perfkit import placement
    from perfkit.book.transformers import decoding

    with placement.use(device="cuda", spec=pk.device_spec("T4"), tensor_device="meta", free_bytes=16e9):
        model = decoding.decode_model("cuda")
        need = max(decoding._decode_need(model, kv, 64, 1024, 4, "float16") for kv in (32, 8))
    assert round(need / 1e9) == 6
    assert "up to 6 GB of GPU memory" in TEACH and "6 GB" in (REPO / "labs" / "04_transformers.md").read_text()
    assert workshop.quick_settings("decode_steps", pk.device_spec("T4")) == {"quick": True, "dtype": "float16"}
