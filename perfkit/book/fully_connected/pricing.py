"""What the model predicts for the FC chapter's experiments, and a recording priced again by today's model.

The experiments (:mod:`perfkit.book.fully_connected.experiments`) write these predictions into their
rows' ``predicted_s`` when they run; a recording keeps the prediction of the model it was recorded
with. :func:`repriced` prices a recorded frame again, as the experiment would now, so that the
figures draw today's model. No torch, no timing: the figures may import this module.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...dtypes import itemsize
from ...gemm_alignment import LINEAR_LAYOUTS
from ...gemm_model import GemmPrediction, explain_gemm
from ...meta import FrameMeta
from ...quantization import pad_to_multiple
from ...shapes import linear_gemms

__all__ = ["PASS_LAYOUTS", "predicted", "repriced", "vocab_predicted_s"]

#: BLAS layout of each pass's GEMM as autograd runs it (torch's row-major names, A then B; see
#: :func:`perfkit.matmul.matmul_operands`): forward W·Xᵀ, dgrad Wᵀ·dYᵀ, wgrad Xᵀ·dY.
PASS_LAYOUTS = {"forward": "NT", "dgrad": "TT", "wgrad": "TN"}


def predicted(M, N, K, dtype, spec, layout="NN") -> GemmPrediction | None:
    """The model's GemmPrediction for the GEMM stored in ``layout`` (perfkit.gemm_alignment), or None."""
    if spec is None:
        return None
    try:
        return explain_gemm(M, N, K, dtype, spec, layout=layout)
    except LookupError:  # no peak or bandwidth known for this dtype on this device
        return None


def vocab_predicted_s(phase, impl, multiple, vocab, in_features, tokens, dtype, spec) -> float:
    """The model's seconds for one ``vocab_padding`` variant: the pass's GEMMs at the padded width, plus
    for a sliced backward the zero-filled padded gradient and the copy into it (bytes ÷ achievable
    bandwidth); NaN where the model has no price."""
    width = pad_to_multiple(vocab, multiple)
    gemms = linear_gemms(tokens, in_features, width)
    preds = [predicted(*gemms[u], dtype, spec, LINEAR_LAYOUTS[u])
             for u in (["forward"] if phase == "forward" else gemms)]
    if not all(preds):
        return np.nan
    seconds = sum(p.predicted_s for p in preds)
    if impl.endswith("sliced") and phase != "forward" and width > vocab:
        seconds += itemsize(dtype) * tokens * (width + 2 * vocab) / preds[0].bandwidth_ceiling  # zeros, dY in
    return seconds


def repriced(frame: pd.DataFrame | None) -> pd.DataFrame | None:
    """A recorded GPU frame of the FC experiments with ``predicted_s`` (and ``predicted_bound``) from
    today's model on the frame's GPU, as the experiment would price it now.

    A recording keeps the prediction of the model it was recorded with; the figures draw today's.
    Live runs (priced as they ran), CPU runs, frames of a GPU perfkit does not know and None are
    returned as they are; the rest is a copy with the frame's metadata.
    """
    if frame is None or "predicted_s" not in frame.columns or not len(frame):
        return frame
    meta = FrameMeta.of(frame)
    spec = None if meta.live else meta.gpu
    if spec is None:
        return frame

    def price(r):
        if "multiple" in frame.columns:  # vocab_padding
            return vocab_predicted_s(r.phase, r.impl, r.multiple, r.vocab, r.in_features, r.tokens, r.dtype,
                                     spec), ""
        layout = "NT" if "phase" not in frame.columns else \
            LINEAR_LAYOUTS[r.phase] if r.impl == "autograd" else PASS_LAYOUTS[r.phase]
        pred = predicted(int(r.M), int(r.N), int(r.K), r.dtype, spec, layout)
        return (pred.predicted_s, pred.bound) if pred else (np.nan, "")

    prices = [price(r) for r in frame.itertuples(index=False)]
    out = frame.copy()
    out["predicted_s"] = [p for p, _ in prices]
    if "predicted_bound" in out.columns:
        out["predicted_bound"] = [b for _, b in prices]
    out.attrs = {**frame.attrs, "meta": dict(frame.attrs.get("meta") or {})}
    return out
