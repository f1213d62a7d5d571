"""The advisor's cost on a 7B transformer: the targets of issue 25 ("the advisor on real models").

    python scripts/bench_advisor.py

Targets (a benchmark, not a test: it reports and always exits 0): ``pk.advise`` on a 7B transformer built on
the meta device takes at most 2 s and at most 100 MB of extra memory on the project's machines (2 CPU cores,
no GPU). The issue measured 0.5 s and about 10 MB before the advisor learned residual streams, memory-bound
ops and MFU; the point is to keep it there.

Two 7B models, each built under ``torch.device("meta")`` (no weight is allocated) and advised for a
training step of 1 × 2048 tokens on H100-SXM in bfloat16:

- perfkit's own ``pk.zoo.llama()`` (LLaMA-7B);
- transformers' ``LlamaForCausalLM`` with Llama-2-7B's configuration (hidden 4096, 32 layers, 32 heads,
  intermediate 11008, vocabulary 32000): third-party code, with its masks, rotary tables and cache
  (skipped, saying so, when transformers is not installed).

For each it prints

- the wall time of ``pk.advise``: the best of 3 calls (``time.perf_counter``), after one warm-up call on a
  small model so that lazy imports are not counted;
- the extra memory of one call: the peak of the Python heap traced by ``tracemalloc`` during a separate,
  untimed call (tracing slows Python down), and the growth of the process's resident set size (psutil, if
  it is installed) over the first timed call; the larger of the two is compared with the target;
- each against its target, as a ratio with PASS or FAIL;
- the FLOPs per step (``advice.flops``) and a one-line summary of the advice.
"""

from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc

import torch

import perfkit as pk

try:
    import psutil
except ImportError:  # the RSS growth is then not reported
    psutil = None

TARGET_S = 2.0
TARGET_BYTES = 100 * 10**6
SPEC, DTYPE, TOKENS, REPEATS = "H100-SXM", "bfloat16", 2048, 3


def _rss() -> int | None:
    return psutil.Process(os.getpid()).memory_info().rss if psutil else None


def _zoo_llama() -> torch.nn.Module:
    return pk.zoo.llama()


def _hf_llama() -> torch.nn.Module:
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                                      num_key_value_heads=32, intermediate_size=11008, vocab_size=32000,
                                      max_position_embeddings=4096)
    return transformers.LlamaForCausalLM(config)


def _advise(model: torch.nn.Module, inputs: torch.Tensor):
    return pk.advise(model, inputs, DTYPE, SPEC, training=True)


def _verdict(ratio: float) -> str:
    return "PASS" if ratio <= 1 else "FAIL"


def _summary(advice) -> str:
    rules = advice.by_rule()
    share = getattr(advice, "memory_bound_share", None)
    memory = f"; memory-bound ops {pk.units.format_percent(share)} of the step" if share is not None else ""
    return (f"step predicted at {pk.units.format_time(advice.step_s)}; {len(advice.ops)} ops, "
            f"{len(advice.findings)} findings ({', '.join(f'{r} {n}' for r, n in rules['findings'].items())})"
            f"{memory}")


def measure(name: str, build) -> None:
    """Build ``name`` on meta, then time ``advise`` and measure the memory it takes; print the results."""
    t0 = time.perf_counter()
    with torch.device("meta"):
        model = build()
    build_s = time.perf_counter() - t0
    ids = torch.zeros(1, TOKENS, dtype=torch.long, device="meta")
    params = pk.zoo.parameter_count(model)
    times, rss_growth, advice = [], None, None
    for i in range(REPEATS):
        gc.collect()
        before = _rss()
        t0 = time.perf_counter()
        advice = _advise(model, ids)
        times.append(time.perf_counter() - t0)
        if i == 0 and before is not None:
            rss_growth = max(0, _rss() - before)
    gc.collect()
    tracemalloc.start()
    _advise(model, ids)
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    best = min(times)
    extra = max(heap_peak, rss_growth or 0)
    print(f"\n{name}: {params / 1e9:.2f} B parameters, built on meta in {build_s:.2f} s; tokens (1, {TOKENS}), "
          "a training step")
    print(f"  advise: best of {REPEATS} {best:.3f} s (all: {', '.join(f'{t:.3f}' for t in times)}) = "
          f"{best / TARGET_S:.2f} × the {TARGET_S:.0f} s target: {_verdict(best / TARGET_S)}")
    rss = f"RSS growth {rss_growth / 1e6:.1f} MB" if rss_growth is not None else "RSS growth n/a (no psutil)"
    print(f"  extra memory: Python heap peak {heap_peak / 1e6:.1f} MB (tracemalloc), {rss}; the larger "
          f"{extra / 1e6:.1f} MB = {extra / TARGET_BYTES:.2f} × the {TARGET_BYTES / 1e6:.0f} MB target: "
          f"{_verdict(extra / TARGET_BYTES)}")
    flops = getattr(advice, "flops", None)
    print(f"  FLOPs per step: {flops / 1e12:,.1f} TFLOP" if flops is not None else "  FLOPs per step: n/a")
    print(f"  advice: {_summary(advice)}")


def main() -> int:
    print(f"perfkit {pk.__version__}, torch {torch.__version__}, {os.cpu_count()} CPU cores; "
          f"targets: ≤ {TARGET_S:.0f} s and ≤ {TARGET_BYTES / 1e6:.0f} MB extra per advise call")
    with torch.device("meta"):  # warm-up: lazy imports and caches of the first call are not the model's cost
        _advise(pk.zoo.llama(dim=256, layers=1, heads=4, ffn=512, vocab_size=1000),
                torch.zeros(1, 16, dtype=torch.long, device="meta"))
    measure("perfkit.zoo.llama() (LLaMA-7B)", _zoo_llama)
    try:
        import transformers
    except ImportError:
        print("\ntransformers LlamaForCausalLM (Llama-2-7B config): skipped, transformers is not installed")
    else:
        measure(f"transformers {transformers.__version__} LlamaForCausalLM (Llama-2-7B config)", _hf_llama)
    return 0


if __name__ == "__main__":
    sys.exit(main())
