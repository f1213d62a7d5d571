"""The front door: reading times, chapter list, striking rules, links from a rule to its section."""

from __future__ import annotations

import pandas as pd
import pytest

from perfkit.book import front

CHAPTER = """---
jupytext: {}
---

# Matrix multiplication

Some prose words here.

```{code-cell} ipython3
x = 1  # code is not read
```

## 3. Tensor Core alignment: multiples of 8

More prose.
"""


def test_prose_words_skip_front_matter_and_code():
    assert front.prose_words(CHAPTER) == len("Matrix multiplication Some prose words here. 3. Tensor Core "
                                             "alignment: multiples of 8 More prose.".split())


def test_reading_minutes_round_up_to_five():
    assert front.reading_minutes(CHAPTER) == 5
    long = CHAPTER + " word" * 2100  # 2,100 words at 200 a minute: 10.5 → 15
    assert front.reading_minutes(long) == 15
    with pytest.raises(ValueError, match="words_per_minute"):
        front.reading_minutes(CHAPTER, words_per_minute=0)
    with pytest.raises(TypeError, match="md must be"):
        front.reading_minutes(None)


def test_section_anchor_is_the_html_id():
    assert front.section_anchor(CHAPTER, 3) == "tensor-core-alignment-multiples-of-8"
    assert front.section_anchor(CHAPTER, 4) is None


def test_rule_href_falls_back_to_the_verdict():
    sources = {"02_gemm": CHAPTER}
    assert front.rule_href("02_gemm", "§3: align gain", sources) == (
        "chapters/02_gemm.html#tensor-core-alignment-multiples-of-8")
    assert front.rule_href("02_gemm", "section 3", sources).endswith("#tensor-core-alignment-multiples-of-8")
    assert front.rule_href("02_gemm", "§9", sources) == "chapters/02_gemm.html#verdict"
    assert front.rule_href("05_convolutions", "§1", sources) == "chapters/05_convolutions.html#verdict"


def test_measured_as_drops_the_section():
    assert front.measured_as("§2: best TFLOP/s ÷ TFLOP/s at batch 16") == "Best TFLOP/s ÷ TFLOP/s at batch 16"
    assert front.measured_as("section 3") == ""


def test_chapter_list_needs_a_blurb_per_chapter():
    html = front.chapter_list({"02_gemm": CHAPTER}, {"02_gemm": "alignment"})
    assert 'href="chapters/02_gemm.html">Matrix multiplication</a>' in html and "5 min" in html
    with pytest.raises(LookupError, match="02_gemm"):
        front.chapter_list({"02_gemm": CHAPTER}, {})


def test_striking_rows_link_and_say_what_they_rest_on():
    table = pd.DataFrame([{"chapter": "02_gemm", "rule": "Align", "claim": "faster (unaligned ÷ aligned)",
                           "then": "1.04", "now": "4.92", "unit": "×", "verdict": "holds",
                           "where": "§3: unaligned ÷ aligned time",
                           "now_from": "ours, recorded on H200 on 2026-11-26"}])
    html = front.striking(table, [("02_gemm", "Align", "unaligned ÷ aligned time")], {"02_gemm": CHAPTER})
    assert '#tensor-core-alignment-multiples-of-8">Align</a>' in html
    assert "1.04 → 4.92 ×" in html and "unaligned ÷ aligned time" in html
    assert "now: recorded on H200 on 2026-11-26</caption>" in html and "<th>Now rests on</th>" not in html
    two = pd.concat([table, table.assign(rule="Other", now_from="published by X, measured on H100 (2025)")])
    html = front.striking(two, [("02_gemm", "Align", ""), ("02_gemm", "Other", "")], {"02_gemm": CHAPTER})
    assert "<th>Now rests on</th>" in html and "published by X" in html
    with pytest.raises(LookupError, match="no rule 'Other'"):
        front.striking(table, [("02_gemm", "Other", "")], {"02_gemm": CHAPTER})


def test_rests_on_is_short():
    assert front.rests_on("ours, recorded on H200 on 2026-11-26") == "recorded on H200 on 2026-11-26"
    assert front.rests_on("") == "the model"
