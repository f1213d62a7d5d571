"""The GEMMs behind layers, in NVIDIA's conventions (M, N, K of C[M×N] = A[M×K]·B[K×N]).

- Linear (*Linear/Fully-Connected Layers* guide; weights are A, activations B).
- Convolution as implicit GEMM (*Convolutional Layers* guide; CUTLASS ``implicit_gemm_convolution``):
  input N×C×H×W, filter K×C×R×S, output N×K×P×Q.
- Recurrent cells (*Recurrent Layers* guide): one fused weight of ``gates·hidden`` rows.

Every function returns a dict of phase name → ``(M, N, K)`` tuple of ints.
"""

from __future__ import annotations

from typing import Any

from ._validate import int_or_pair, non_negative_int, one_of, positive_int

__all__ = ["RNN_GATES", "conv_gemms", "conv_output_size", "linear_gemms", "rnn_gemms"]

Gemm = tuple[int, int, int]

#: Gate count per recurrent cell: the fused weight has ``gates·hidden`` rows.
RNN_GATES: dict[str, int] = {"rnn": 1, "gru": 3, "lstm": 4}


def linear_gemms(batch: int, in_features: int, out_features: int) -> dict[str, Gemm]:
    """GEMMs of a linear layer: forward, activation gradient (dgrad), weight gradient (wgrad).

    forward ``(out, batch, in)``, dgrad ``(in, batch, out)``, wgrad ``(in, out, batch)``.
    """
    b = positive_int("batch", batch)
    i = positive_int("in_features", in_features)
    o = positive_int("out_features", out_features)
    return {"forward": (o, b, i), "dgrad": (i, b, o), "wgrad": (i, o, b)}


def conv_output_size(H: int, W: int, R: int, S: int, stride: Any = 1, padding: Any = 0,
                     dilation: Any = 1) -> tuple[int, int]:
    """Output height and width ``(P, Q)`` of a convolution.

    ``P = floor((H + 2·pad_h − (d_h·(R−1) + 1)) / stride_h) + 1``, likewise Q from W and S.
    ``stride``, ``padding`` and ``dilation`` are an int or an ``(h, w)`` pair. Raises
    ``ValueError`` when the dilated filter is larger than the padded input (empty output).
    """
    H, W = positive_int("H", H), positive_int("W", W)
    R, S = positive_int("R", R), positive_int("S", S)
    sh, sw = int_or_pair("stride", stride, positive_int)
    ph, pw = int_or_pair("padding", padding, non_negative_int)
    dh, dw = int_or_pair("dilation", dilation, positive_int)
    out = []
    for axis, size, f, s, p, d, fname in (("P", H, R, sh, ph, dh, "R"), ("Q", W, S, sw, pw, dw, "S")):
        eff = d * (f - 1) + 1
        n = (size + 2 * p - eff) // s + 1
        if n < 1:
            raise ValueError(
                f"conv output would be empty ({axis} = {n}): the dilated filter ({fname}={f}, dilation {d}: "
                f"{eff} wide) is larger than the padded input ({size} + 2·{p} = {size + 2 * p}); "
                f"use a smaller filter or dilation, or more padding")
        out.append(n)
    return out[0], out[1]


def conv_gemms(N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: Any = 1,
               padding: Any = 0, dilation: Any = 1) -> dict[str, Gemm]:
    """Implicit GEMMs of a convolution (input N×C×H×W, K filters of C×R×S).

    forward ``(N·P·Q, K, C·R·S)``, dgrad ``(N·H·W, C, K·R·S)``, wgrad ``(C·R·S, K, N·P·Q)``.
    """
    N, C, K = positive_int("N", N), positive_int("C", C), positive_int("K", K)
    P, Q = conv_output_size(H, W, R, S, stride, padding, dilation)
    return {
        "forward": (N * P * Q, K, C * R * S),
        "dgrad": (N * H * W, C, K * R * S),
        "wgrad": (C * R * S, K, N * P * Q),
    }


def rnn_gemms(cell: str, hidden: int, input_size: int, batch: int, seq_len: int) -> dict[str, Gemm]:
    """GEMMs of one recurrent layer, with ``gates = RNN_GATES[cell]``.

    - ``"input"``: ``(gates·hidden, batch·seq_len, input_size)``: independent across time steps,
      so done once for the whole sequence.
    - ``"recurrent"``: ``(gates·hidden, batch, hidden)``: sequential, repeated ``seq_len`` times.
    """
    g = RNN_GATES[one_of("cell", cell, tuple(RNN_GATES))]
    h = positive_int("hidden", hidden)
    x = positive_int("input_size", input_size)
    b = positive_int("batch", batch)
    t = positive_int("seq_len", seq_len)
    return {"input": (g * h, b * t, x), "recurrent": (g * h, b, h)}
