#!/usr/bin/env python
"""Record our own torch.profiler traces: one step each of ResNet-50 (NCHW, channels-last), GPT-2 small and a LLaMA decode.

    python scripts/record_traces.py --out DIR [--runs NAME ...] [--quick] [--no-progress]

Writes ``DIR/<device-slug>/traces/<run>.json.gz`` (gzipped, at most 3 MB) and ``<run>.json`` (its metadata)
for each run of ``perfkit.book.check_your_model.own_traces.TRACE_RUNS`` (``--runs``: only these), and prints
each file and its size. On a GPU: the real sizes in bfloat16; on a CPU (or ``--quick``) the models shrunk, in
float32 on a CPU, and never into the repository's ``data/``. Exit status: 0 when every trace was written,
1 when a run failed (e.g. its trace was over 3 MB: refused, not truncated; the others are kept), 2 on bad
input (one line on stderr, nothing run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from perfkit.book.check_your_model.own_traces import TRACE_RUNS, TracesFailed, record_traces  # noqa: E402


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the usage too)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _print(frame) -> None:
    for row in frame.itertuples():
        print(f"{row.path}  {row.bytes:,} bytes ({row.bytes / 1e6:.2f} MB)  {row.model} {row.mode} {row.dtype} "
              f"on {row.device}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="record_traces.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="the folder written: OUT/<device-slug>/traces/")
    ap.add_argument("--runs", nargs="+", metavar="NAME", help=f"only these runs, of: {', '.join(TRACE_RUNS)}")
    ap.add_argument("--quick", action="store_true", help="the shrunk models (as on a CPU)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        frame = record_traces(args.out, args.runs, quick=args.quick, progress=not args.no_progress)
    except TracesFailed as e:
        _print(e.written)
        for name, error in e.failed.items():
            print(f"FAILED {name}: {error}", file=sys.stderr, flush=True)
        return 1
    except (LookupError, TypeError, ValueError) as e:  # bad input, refused before any model is built
        ap.error(str(e).replace("\n", " "))
    _print(frame)
    print(f"{len(frame)} trace(s) in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
