"""The advisor's performance target: a 4B+-parameter transformer on the meta device is advised in under
10 s with under 1 GB of extra memory, on a 2-core machine without a GPU.

    python scripts/bench_advisor.py [--quick] [--tokens 4096]

Builds LLaMA-7B (``pk.zoo.llama()``) and LLaMA-13B (``pk.zoo.LLAMA_CONFIGS["13B"]``; skipped with
``--quick``) under ``torch.device("meta")`` (no weight is allocated) and times ``pk.advise`` on
1 × ``--tokens`` token ids (H100-SXM, bfloat16, a training step): one cold call, as a user makes it.
For each it prints

- the wall time of ``advise`` and its ratio to the 10 s target;
- the process's extra memory: resident set size (psutil) after the call minus before it, and the peak
  during the call (the larger of a 5 ms RSS sampler's maximum and ``ru_maxrss``, minus the RSS
  before: ``ru_maxrss`` is the process's lifetime peak, so this is an upper bound), with the ratio of
  the peak to the 1 GB target;
- the Python heap's peak during a second, untimed call (``tracemalloc``, which slows Python down).

As a reference measured in the same run, it also times GPT-2 small (124 M parameters) at 8 × 1024
tokens: the ratio of the big model's time to GPT-2's says how the advisor scales with the model's
size (its layers), independently of this machine's speed. Exit status 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import threading
import time
import tracemalloc

import psutil
import torch

import perfkit as pk

TARGET_S = 10.0
TARGET_BYTES = 1 << 30
SPEC, DTYPE = "H100-SXM", "bfloat16"


def _rss() -> int:
    return psutil.Process(os.getpid()).memory_info().rss


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


class _PeakSampler:
    """Samples this process's RSS every ``interval_s`` in a thread; ``peak`` is the largest seen."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s, self.peak = interval_s, _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "_PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def _build(name: str, config: dict) -> torch.nn.Module:
    with torch.device("meta"):
        return pk.zoo.gpt2_small() if name == "GPT-2 small" else pk.zoo.llama(**config)


def _advise(model: torch.nn.Module, shape: tuple[int, ...]):
    return pk.advise(model, torch.zeros(shape, dtype=torch.int64, device="meta"), DTYPE, SPEC, training=True)


def measure(name: str, config: dict, shape: tuple[int, ...]) -> dict:
    """Build ``name`` on meta, then time one ``advise`` call and measure the memory it takes."""
    t0 = time.perf_counter()
    model = _build(name, config)
    build_s = time.perf_counter() - t0
    gc.collect()
    before = _rss()
    with _PeakSampler() as sampler:
        t0 = time.perf_counter()
        advice = _advise(model, shape)
        advise_s = time.perf_counter() - t0
    after = _rss()
    peak = max(sampler.peak, _maxrss())
    tracemalloc.start()
    _advise(model, shape)
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"model": name, "params": pk.zoo.parameter_count(model), "tokens": shape, "build_s": build_s,
            "advise_s": advise_s, "extra_rss": after - before, "extra_peak": max(0, peak - before),
            "heap_peak": heap_peak, "ops": len(advice.ops), "passes": len(advice.layers),
            "findings": len(advice.findings), "rules": ", ".join(advice.by_rule().index)}


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="LLaMA-7B only (skip 13B)")
    p.add_argument("--tokens", type=int, default=4096, help="sequence length of the one sequence (default 4096)")
    args = p.parse_args(argv)
    if args.tokens < 1:
        p.error("--tokens must be positive")

    cases = [("LLaMA-7B", pk.zoo.LLAMA_CONFIGS["7B"])]
    if not args.quick and "13B" in pk.zoo.LLAMA_CONFIGS:
        cases.append(("LLaMA-13B", pk.zoo.LLAMA_CONFIGS["13B"]))
    print(f"perfkit {pk.__version__}, torch {torch.__version__}, {os.cpu_count()} CPU cores, "
          f"advising a training step on {SPEC} in {DTYPE}")
    big = []
    for name, config in cases:
        config = {**config, "context": max(config["context"], args.tokens)}
        big.append(measure(name, config, (1, args.tokens)))
    ref = measure("GPT-2 small", {}, (8, 1024))
    ok = True
    for r in big + [ref]:
        print(f"\n{r['model']}: {r['params'] / 1e9:.2f} B parameters, tokens {r['tokens']}; {r['ops']} ops, "
              f"{r['passes']} passes, {r['findings']} findings ({r['rules']})")
        print(f"  build on meta {r['build_s']:.2f} s; advise {r['advise_s']:.2f} s", end="")
        if r is ref:
            print(" (reference)")
        else:
            print(f" = {r['advise_s'] / TARGET_S:.2f} × the {TARGET_S:.0f} s target; "
                  f"{r['advise_s'] / ref['advise_s']:.1f} × GPT-2 small's time")
        print(f"  extra memory: RSS after − before {_mb(r['extra_rss'])}, peak − before {_mb(r['extra_peak'])}"
              + ("" if r is ref else f" = {r['extra_peak'] / TARGET_BYTES:.2f} × the 1 GB target")
              + f"; Python heap peak {_mb(r['heap_peak'])}")
        if r is not ref:
            missed = [what for what, bad in (("time", r["advise_s"] > TARGET_S),
                                             ("memory", r["extra_peak"] > TARGET_BYTES)) if bad]
            if missed:
                ok = False
                print(f"  MISSED: {', '.join(missed)}")
    print("\nall targets met" if ok else "\na target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
