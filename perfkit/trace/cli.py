"""``python -m perfkit trace FILE [FILE ...] [--spec NAME] [--csv OUT] [--top N] [--no-progress]``.

Prints :func:`perfkit.diagnose_trace`'s report; ``--csv`` also writes ``report.ops`` (one row per op
instance), only once the whole trace was read and diagnosed, through a temporary file renamed into
place, so a failure never leaves a half-written CSV. Exit codes: 0 success, 2 bad input (the message
names the file and what is wrong), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._files import write_atomic
from .report import diagnose_trace
from .text import report_text

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The ``trace`` subcommand's arguments."""
    pt = sub.add_parser("trace", help="a torch.profiler trace diagnosed op by op: time, the model's prediction, "
                                      "the rule that explains the gap, the fix")
    pt.add_argument("files", nargs="+", metavar="FILE",
                    help="Kineto JSON trace(s), .json or .json.gz (several: one per rank), or a folder of them")
    pt.add_argument("--spec", default=None, metavar="NAME",
                    help="the GPU, e.g. H100-SXM (default: the one the trace's deviceProperties names)")
    pt.add_argument("--csv", default=None, metavar="OUT", help="also write one row per op instance to OUT")
    pt.add_argument("--top", type=int, default=10, metavar="N", help="how many time sinks to print (default 10)")
    pt.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Run ``perfkit trace``; returns the exit code."""
    if args.top < 1:
        print(f"perfkit trace: --top must be at least 1, got {args.top}", file=sys.stderr)
        return 2
    if args.csv and not Path(args.csv).parent.is_dir():
        print(f"perfkit trace: --csv: the folder {Path(args.csv).parent} does not exist", file=sys.stderr)
        return 2
    files = args.files[0] if len(args.files) == 1 else args.files
    try:
        report = diagnose_trace(files, spec=args.spec, progress=not args.no_progress)
    except (TypeError, ValueError, LookupError, OSError) as e:
        print(f"perfkit trace: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("perfkit trace: interrupted; nothing was written", file=sys.stderr)
        return 130
    print(report_text(report, top=args.top))
    if args.csv:
        write_atomic(Path(args.csv), report.ops.to_csv(index=False).encode("utf-8"))
        print(f"\nop instances written to {args.csv}")
    return 0
