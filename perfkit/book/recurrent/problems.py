"""The problems of chapter 04_recurrent, with answers computed by perfkit."""

from __future__ import annotations

from ...devices import device_spec
from ...gemm_model import explain_gemm
from ...kernels.cupy_rnn import max_persistent_hidden
from ...published_data import has_published, published
from ...roofline import gemm_flops, math_bound_batch
from ...shapes import rnn_gemms
from ..exercise import Exercise

CHAPTER = "04_recurrent"

#: Shared memory one H100 block may use (opt-in), bytes: 227 KiB (as in the chapter's table).
H100_SMEM_PER_BLOCK = 227 * 1024


def _math_bound(cell: str, hidden: int, spec: str) -> int:
    """Smallest batch at which the cell's recurrent GEMM reaches the ridge point of ``spec``."""
    M, _, K = rnn_gemms(cell, hidden, hidden, 1, 1)["recurrent"]
    return math_bound_batch(K, M, device_spec(spec))


def _idle_sms(spec: str, gates: int = 1) -> int:
    """SMs of ``spec`` left without work in the last wave of a vanilla H = 2560 step at batch 32: each of
    the ``tiles`` is cut into ``split_k`` pieces along K, one SM each."""
    s = device_spec(spec)
    p = explain_gemm(gates * 2560, 32, 2560, "float16", s)
    return p.waves * s.sms - p.tiles * p.split_k


#: The forward time problem rnn-3 states ("about 0.18 s", seconds): its answer where DeepBench's table
#: is not on this machine (the reader computes from the same number).
GRU_STATED_S = 0.18


def _gru_time_s() -> float:
    """Forward seconds of DeepBench's V100 GRU (H = 2816, batch 32, T = 1500, float16): the published
    row, or the time the question states where the published table is absent."""
    if not has_published("deepbench_rnn"):
        return GRU_STATED_S
    rnn = published("deepbench_rnn", "V100-SXM2")
    row = rnn[(rnn["cell"] == "gru") & (rnn["hidden"] == 2816) & (rnn["batch"] == 32)
              & (rnn["timesteps"] == 1500) & (rnn["dtype"] == "float16")].iloc[0]
    return float(row["time_s"])


def _gru_tflop_s(gates: int = 3, flops_per_fma: int = 2, input_gemm: bool = False) -> float:
    """Recurrent TFLOP/s of DeepBench's V100 GRU (H = 2816, batch 32, T = 1500, float16)."""
    flops = gemm_flops(gates * 2816, 32, 2816) * 1500 * flops_per_fma / 2
    return flops * (2 if input_gemm else 1) / _gru_time_s() / 1e12


def _largest_lstm(gates: int = 4) -> int:
    """Largest H whose fused gates·H × H fp16 U holds no more weights than the largest vanilla U
    an H100 keeps on chip (:func:`max_persistent_hidden`)."""
    largest = max_persistent_hidden(sms=device_spec("H100-SXM").sms, smem_per_block_bytes=H100_SMEM_PER_BLOCK)
    h = largest
    while gates * h * h > largest * largest:
        h -= 1
    return h


def _step_bound() -> str:
    """What bounds the per-step recurrent GEMM of an LSTM with H = 256 at batch 1 on an H100."""
    M, N, K = rnn_gemms("lstm", 256, 256, 1, 1)["recurrent"]
    return explain_gemm(M, N, K, "float16", device_spec("H100-SXM")).bound


EXERCISES: list[Exercise] = [
    Exercise(
        "rnn-1", CHAPTER,
        "An LSTM with H = 1536 runs at batch 8 on an H100 (float16). From which batch is its recurrent "
        "GEMM math-bound? Use pk.rnn_gemms and pk.math_bound_batch.",
        lambda: _math_bound("lstm", 1536, "H100-SXM"), unit="sequences", rel_tol=0, close_tol=0.1, fmt="{:,.0f}",
        hint="the recurrent GEMM is (4·H, batch, H); math_bound_batch takes (in_features = K, "
             "out_features = M, spec).",
        mistakes=((lambda: _math_bound("lstm", 1536, "V100-SXM2"), "that is a V100's threshold; the H100's "
                   "ridge point is much higher."),
                  (lambda: _math_bound("rnn", 1536, "H100-SXM"), "that GEMM has M = H; an LSTM's U stacks "
                   "its four gates, so M = 4·H."))),
    Exercise(
        "rnn-2", CHAPTER,
        "One step of a vanilla RNN with H = 2560 at batch 32 is a 2560 × 32 × 2560 GEMM. How many of "
        "an H100's SMs get no work in the model's last wave? Use pk.explain_gemm (tiles, split_k, "
        "waves) and the spec's sms.",
        lambda: _idle_sms("H100-SXM"), unit="SMs", rel_tol=0, close_tol=0.1, fmt="{:,.0f}",
        hint="each tile is split along K into split_k pieces, one SM each: idle SMs = waves × sms − "
             "tiles × split_k.",
        mistakes=((lambda: explain_gemm(2560, 32, 2560, "float16", device_spec("H100-SXM")).tiles,
                   "that is the number of tiles; each is split along K into split_k pieces."),
                  (lambda: (lambda p: p.waves * device_spec("H100-SXM").sms - p.tiles)(
                      explain_gemm(2560, 32, 2560, "float16", device_spec("H100-SXM"))),
                   "the model splits each tile along K (split_k pieces): count tiles × split_k."),
                  (lambda: _idle_sms("V100-SXM2"), "that is the V100's case, as many tiles as SMs; an H100 "
                   "has more SMs than tiles here."))),
    Exercise(
        "rnn-3", CHAPTER,
        f"DeepBench's GRU with H = 2816, batch 32 and T = 1500 took about {GRU_STATED_S} s forward on a V100 "
        "(input GEMM skipped). What TFLOP/s did its recurrent GEMMs reach? Use pk.rnn_gemms and "
        "pk.gemm_flops (the row is in pk.published('deepbench_rnn', 'V100-SXM2')).",
        _gru_tflop_s, unit="TFLOP/s", rel_tol=0.02, close_tol=0.10, fmt="{:.3g}",
        hint="the recurrent GEMM is (3·H, batch, H), done T times; 2·M·N·K FLOPs each.",
        mistakes=((lambda: _gru_tflop_s(gates=1), "a GRU's U stacks three gates: M = 3·H."),
                  (lambda: _gru_tflop_s(flops_per_fma=1), "a multiply-add counts as two FLOPs."),
                  (lambda: _gru_tflop_s(input_gemm=True), "DeepBench skipped the input GEMM "
                   "(CUDNN_SKIP_INPUT): count only the recurrent math."))),
    Exercise(
        "rnn-4", CHAPTER,
        "What is the largest LSTM hidden size H whose fused recurrent weight U (4H × H, fp16) holds no "
        "more weights than the largest vanilla U that perfkit's persistent kernel keeps on an H100's "
        "chip? Use pk.kernels.max_persistent_hidden(sms=132, smem_per_block_bytes=227 * 1024).",
        _largest_lstm, unit="hidden units", rel_tol=0.03, close_tol=0.15, fmt="{:,.0f}",
        hint="U has 4·H² weights; the vanilla limit holds H_max² of them.",
        mistakes=((lambda: _largest_lstm(gates=1), "that is the vanilla limit; an LSTM's U has four "
                   "gates' rows, 4·H² weights."),
                  (lambda: _largest_lstm(gates=16), "4·H² ≤ H_max² gives H ≤ H_max / 2, not H_max / 4."))),
    Exercise(
        "rnn-5", CHAPTER,
        "A loop of GEMMs runs an LSTM with H = 256 at batch 1 on an H100. Is each step's recurrent GEMM "
        "math-, memory- or latency-bound according to pk.explain_gemm?",
        _step_bound, choices=("math", "memory", "latency"),
        hint="compare the time to read U once with the model's launch latency (explain_gemm's "
             "memory_s and launch_overhead_s).",
        mistakes=((lambda: "memory", "U is only 0.5 MiB: reading it takes far less time than "
                   "launching the kernel."),
                  (lambda: "math", "at batch 1 a step does 2·4H·H FLOPs, a tiny fraction "
                   "of what the tensor cores could do in the same time."))),
]
