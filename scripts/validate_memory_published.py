"""Print the byte model's targets on published memory-bound measurements (issue 23), and the numbers
the memory-limited chapter and the timing appendix quote.

Targets (printed, never checked by a timed test):

1. the byte model (``pk.memory_time`` of ``pk.layer_bytes``) on Liger-Kernel's fused H100 layer
   norm, forward: median |predicted ÷ measured − 1| ≤ 15 %;
2. the eager ÷ fused time ratio the model predicts (Σ ``pk.memory_time`` of each eager kernel's
   bytes ÷ the fused kernel's) within 25 % of the measured one, per eager/fused pair
   (``perfkit.book.memory_limited.published.PAIRS``), at the pair's largest size.

Then, for reference: every fused kernel's median error, the gpu-benches stream bandwidths against
the datasheets, and the H200 small-kernel floors and plateaus. Run from the repository root::

    python scripts/validate_memory_published.py [--strict]

``--strict`` exits with status 1 when a target fails. Without the published tables it says how to
get them and exits 0.
"""

from __future__ import annotations

import argparse
import sys

import perfkit as pk
from perfkit.book.memory_limited import published as mp
from perfkit.book.timing import published as tp
from perfkit.units import format_time

LAYER_NORM_TARGET = 0.15  # median |error| of the byte model on Liger's fused H100 layer norm
RATIO_TARGET = 0.25  # |predicted ÷ measured ratio − 1| per eager/fused pair


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def layer_norm_target(forward) -> bool:
    rows = forward[(forward["device"] == "H100-SXM") & (forward["kernel"] == "layer_norm")
                   & (forward["provider"] == mp.FUSED["layer_norm"])].sort_values("hidden")
    print("1. Byte model on Liger's fused layer norm, H100 SXM, forward (float32, 4096 rows)")
    for r in rows.itertuples():
        print(f"   hidden {r.hidden:>6}: measured {format_time(r.time_s):>9}, model {format_time(r.predicted_s):>9}, "
              f"error {r.error:+.1%}")
    median = float(rows["error"].abs().median())
    ok = median <= LAYER_NORM_TARGET
    print(f"   median |error| {median:.1%} (target ≤ {LAYER_NORM_TARGET:.0%}): {_verdict(ok)}\n")
    return ok


def ratio_target(pairs) -> bool:
    top = pairs[pairs["largest"]]
    print("2. Eager ÷ fused forward time, largest size of each pair: measured against the byte model")
    passed = 0
    for r in top.itertuples():
        ok = abs(r.error) <= RATIO_TARGET
        passed += ok
        print(f"   {r.device:<15} {r.kernel:<19} {r.eager_label:<27} ({int(r.eager_kernels)} kernel{'s' if r.eager_kernels > 1 else ''}, hidden {r.hidden:>5}): "
              f"measured {r.ratio:5.2f}×, model {r.predicted_ratio:5.2f}× (bytes {r.bytes_ratio:.2f}×), "
              f"error {r.error:+.1%} {_verdict(ok)}")
    ok = passed == len(top)
    print(f"   {passed} of {len(top)} pairs within {RATIO_TARGET:.0%}: {_verdict(ok)}")
    every = pairs["error"].abs()
    print(f"   (all sizes: {int((every <= RATIO_TARGET).sum())} of {len(pairs)} within {RATIO_TARGET:.0%}, "
          f"median |error| {every.median():.1%})\n")
    return ok


def reference(liger, forward, stream, small) -> None:
    print("Reference: the byte model's median |error| per fused kernel, forward")
    fused = forward[forward["role"] == "fused"]
    for (dev, kernel, prov), g in fused.groupby(["device", "kernel", "provider"]):
        print(f"   {dev:<15} {kernel:<19} {prov:<25} {g['error'].abs().median():6.1%} "
              f"(best {g['gbps'].max():,.0f} GB/s)")
    for gpu in ("H100-SXM", "A100-SXM4-80GB"):
        print(f"   {gpu}: best fused kernel {mp.achieved_fraction_of_bandwidth(liger, gpu):.0%} of the datasheet "
              f"bandwidth; slowest ÷ fastest fused GB/s {mp.bandwidth_spread(liger, gpu):.2f}; "
              f"fusion saving measured ÷ predicted {mp.fusion_saving_realised(liger, gpu):.2f}")
    if stream is not None:
        print("\nReference: gpu-benches stream (triad, float64, host-timed)")
        for gpu in mp.GENERATIONS:
            print(f"   {gpu:<15} best {mp.stream_peak_fraction(stream, gpu):.0%} of the datasheet; "
                  f"90 % of its best from {mp.occupancy_for_fraction(stream, gpu):.1f} % occupancy")
    if small is not None:
        print("\nReference: gpu-benches small kernels, H200 (host-timed launch loops)")
        for r in tp.small_kernel_summary(small).itertuples():
            print(f"   {r.variant:<18} floor {format_time(r.floor_s):>8}; < 2× floor up to {r.launch_bound_bytes / 1e6:5.1f} MB; "
                  f"L2 plateau {r.l2_gbps:,.0f} GB/s; HBM plateau {r.hbm_gbps:,.0f} GB/s ({r.hbm_fraction:.0%})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", action="store_true", help="exit with status 1 when a target fails")
    args = ap.parse_args(argv)
    liger = pk.published_or_none("liger_memory_bound")
    if liger is None:
        print(f"Liger-Kernel's table is not here: {pk.published_data.HOW_TO_GET}")
        return 0
    forward = mp.liger_forward(liger)
    ok = layer_norm_target(forward)
    ok &= ratio_target(mp.fusion_pairs(forward))
    reference(liger, forward, pk.published_or_none("gpu_benches_stream"),
              pk.published_or_none("gpu_benches_small_kernels"))
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
