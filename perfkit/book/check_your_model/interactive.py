"""Interactive figures of chapter 09_check_your_model: a menu of advised models.

:func:`model_menu` draws, for one model at a time (a drop-down menu switches between them), where
its predicted step goes by kind of work (``Advice.layers``, grouped as
:func:`perfkit.book.check_your_model.figures.op_kind` groups them) and what each rule's fixes are predicted to save
(``Advice.by_rule()``). It draws :class:`~perfkit.advisor.Advice` objects the chapter has already
computed, so the figure costs no advising; without them it advises :func:`small_zoo` itself.
Every number is a model prediction for the advice's device; shares are fractions of the step.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import plotly.graph_objects as go
from matplotlib.colors import to_hex

from ... import zoo
from ...advisor import RULES, Advice, advise
from ...provenance import modelled
from ...units import format_percent, format_time
from ..interactive import InteractiveFigure, State, retitle, rounded, with_menu
from .figures import KIND_COLOURS, KINDS, RULE_COLOURS, op_kind

__all__ = ["FIGURES", "kind_seconds", "model_menu", "rule_savings", "small_zoo"]

#: The colours of the kinds of work and of the rules, as in the chapter's static figures; gray
#: marks a rule that fired without a priced saving.
KIND_HEX = [to_hex(KIND_COLOURS[k]) for k in KINDS]
RULE_HEX = {r: to_hex(c) for r, c in RULE_COLOURS.items()}
UNPRICED = "#bbbbbb"


def small_zoo(spec: Any = "H100-SXM", dtype: str = "bfloat16") -> dict[str, Advice]:
    """The chapter's four models advised on ``spec`` in ``dtype`` on the meta device, the two
    transformers cut to 2 of their layers so that this takes seconds on a CPU: GPT-2 small on
    8 × 1024 tokens, ResNet-50 on 32 images of 224², the LSTM LM on 20 × 35 words and LLaMA-7B on
    1 × 2048 tokens, each a training step. Names say which layers were kept."""
    import torch

    builds = {"GPT-2 small (2 of 12 layers)": (lambda: zoo.gpt2_small(layers=2), (8, 1024), torch.long),
              "ResNet-50": (zoo.resnet50, (32, 3, 224, 224), torch.float32),
              "LSTM LM": (zoo.lstm_lm, (20, 35), torch.long),
              "LLaMA-7B (2 of 32 layers)": (lambda: zoo.llama(layers=2), (1, 2048), torch.long)}
    out = {}
    for name, (build, shape, kind) in builds.items():
        with torch.device("meta"):
            model, inputs = build(), torch.zeros(shape, dtype=kind)
        out[name] = advise(model, inputs, dtype, spec)
    return out


def kind_seconds(advice: Advice) -> dict[str, float]:
    """Predicted seconds of ``advice``'s step in each kind of work (every kind of :data:`KINDS`, 0 where
    the model has none)."""
    layers = advice.layers
    if not len(layers):
        return {k: 0.0 for k in KINDS}
    seconds = layers.groupby(layers["op"].map(op_kind))["predicted_s"].sum()
    return {k: float(seconds.get(k, 0.0)) for k in KINDS}


def rule_savings(advice: Advice) -> dict[str, tuple[int, float | None]]:
    """For every rule of :data:`RULES`: (findings, predicted saving in seconds per step), the saving
    None where the rule fired without a positive priced saving; rules that did not fire are (0, None)."""
    table = advice.by_rule()
    out: dict[str, tuple[int, float | None]] = {}
    for rule in RULES:
        if rule not in table.index:
            out[rule] = (0, None)
            continue
        saving = float(table.loc[rule, "predicted_saving_s"])
        out[rule] = (int(table.loc[rule, "findings"]), saving if saving > 0 else None)
    return out


def _named(advices: Any) -> dict[str, Advice]:
    if not isinstance(advices, Mapping):
        raise TypeError(f"advices must be a mapping of name → perfkit.advisor.Advice, got {type(advices).__name__}")
    for name, a in advices.items():
        if not isinstance(name, str):
            raise TypeError(f"advices' keys must be model names (strings), got {name!r}")
        if not isinstance(a, Advice):
            raise TypeError(f"advices[{name!r}] must be a perfkit.advisor.Advice, got {type(a).__name__}")
    if len(advices) < 2:
        raise ValueError(f"advices needs at least two models to choose between, got {len(advices)}")
    return dict(advices)


def _state(name: str, a: Advice) -> State:
    step = a.step_s
    seconds = kind_seconds(a)
    kinds_x = [seconds[k] / step if step else 0.0 for k in KINDS]
    kinds_text = [f"{format_percent(s)} ({format_time(seconds[k])})" if seconds[k] > 0 else ""
                  for k, s in zip(KINDS, kinds_x)]
    rules = rule_savings(a)
    rules_x, rules_text, colours = [], [], []
    for rule in RULES:
        n, saving = rules[rule]
        rules_x.append(saving / step if saving and step else 0.0)
        colours.append(RULE_HEX[rule] if saving else UNPRICED)
        finds = f"{n} finding{'s' if n != 1 else ''}"
        rules_text.append("" if not n else f"saves {format_time(saving)} ({finds})" if saving
                          else f"fired, no saving priced ({finds})")
    mode = "training step" if a.training else "forward pass"
    title = f"{name}: a {a.dtype} {mode} predicted at {format_time(step)}"
    top = max(rules_x) if any(rules_x) else 0.01
    return State(name, [{"x": rounded(kinds_x), "text": kinds_text, "marker.color": KIND_HEX},
                        {"x": rounded(rules_x), "text": rules_text, "marker.color": colours}],
                 {**retitle(title, modelled(a.spec)), "xaxis2.range": [0, round(top * 1.9, 4)],
                  "xaxis2.tickformat": ".0%" if top >= 0.05 else ".1%"})


def model_menu(advices: Mapping[str, Advice] | None = None, *, active: int | str = 0) -> InteractiveFigure:
    """A menu over ``advices`` (model name → :class:`~perfkit.advisor.Advice`, at least two): for the
    chosen model, the share of its predicted step in each kind of work (top) and each rule's predicted
    saving as a share of the step (bottom; a gray label where the rule fired but the model prices no
    saving). ``active`` is the model shown first (index or name). None advises :func:`small_zoo`."""
    named = small_zoo() if advices is None else _named(advices)
    names = list(named)
    if isinstance(active, str):
        if active not in named:
            raise LookupError(f"active must be one of the models {names}, got {active!r}")
        active = names.index(active)
    elif not isinstance(active, int) or isinstance(active, bool) or not 0 <= active < len(names):
        raise ValueError(f"active must be a model's name or an index 0 … {len(names) - 1}, got {active!r}")
    states = [_state(name, a) for name, a in named.items()]
    traces = [go.Bar(y=list(KINDS), orientation="h", textposition="outside",
                     cliponaxis=False, name="share of the step", hovertemplate="%{y}: %{text}<extra></extra>"),
              go.Bar(y=list(RULES), orientation="h", xaxis="x2", yaxis="y2", textposition="outside",
                     cliponaxis=False, name="predicted saving", hovertemplate="%{y}: %{text}<extra></extra>")]
    layout = {"height": 540, "showlegend": False, "margin": {"l": 100, "r": 30, "t": 72, "b": 55},
              "xaxis": {"domain": [0, 1], "anchor": "y", "range": [0, 1.25], "tickformat": ".0%",
                        "tickvals": [0, 0.2, 0.4, 0.6, 0.8, 1.0],
                        "title": {"text": "share of the predicted step, by kind of work"}},
              "yaxis": {"domain": [0.62, 1], "anchor": "x", "autorange": "reversed"},
              "xaxis2": {"domain": [0, 1], "anchor": "y2",
                         "title": {"text": "predicted saving of each rule's fixes, share of the step "
                                           "(fixes may overlap)"}},
              "yaxis2": {"domain": [0, 0.46], "anchor": "x2", "autorange": "reversed"}}
    fig = with_menu(traces, states, active=active, layout=layout)
    alt = ("Bar charts for one model at a time, chosen from a menu (" + ", ".join(names) + "): the share "
           "of its predicted step in each kind of work (linear, conv, attention, matmul, rnn, memory-bound), "
           "and below, each rule's predicted saving as a share of the step. Switching the model moves "
           "the time between kinds and changes which rules pay.")
    return InteractiveFigure(fig, alt=alt, name="advisor-model-menu")


#: name → a function that builds the figure with its defaults (the tests build each one).
FIGURES: dict[str, Callable[[], InteractiveFigure]] = {"model_menu": model_menu}
