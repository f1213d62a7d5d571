"""Command line: ``python -m perfkit {info,list,published,validate,record,advise,calibrate,trace}`` (also ``perfkit``).

- ``info``: this device's spec (every number and where it comes from, its calibrated ceilings when a
  profile was saved) and the software versions (CUDA's, or ROCm's on an AMD GPU);
- ``calibrate [--quick | --thorough] [--dtype D ...] [--out FILE.json] [--no-save] [--no-progress]``: measure
  this device's achievable ceilings and the model's error on it (:func:`perfkit.calibrate`), print the
  report and save the profile (the user's cache, or FILE.json; nothing is written if interrupted);
- ``list``: the registered experiments, the recordings found and the published third-party tables
  perfkit knows (whether each is in the published-data folder: ``$PERFKIT_PUBLISHED``, …);
- ``published [list]``: those tables in full (source, GPUs, rows, commit, licence, timing method);
  ``published fetch [NAME ...] [--into DIR] [--mirror URL=PATH ...] [--allow-mismatch]``: obtain each
  from its public repository at the pinned commit and extract the same rows (checksummed);
- ``record [EXPERIMENT ...] --out DIR [--quick] [--archive FILE.tar.gz] [--no-progress] [--no-resume]``:
  measure and write ``DIR/<device-slug>/<experiment>.csv`` + ``.json`` (see :mod:`perfkit.experiments.record`).
- ``advise package.module:build_model --input 8x3x224x224 [--input 8x1024:int64] [--dtype bfloat16]
  [--spec H100-SXM] [--inference] [--no-meta] [--csv FILE] [--step-time SECONDS]``: build the model (on
  the meta device unless ``--no-meta``: no weight is allocated), run :func:`perfkit.advise` on inputs
  of those shapes (float32 unless ``:dtype`` says otherwise, e.g. ``:int64`` for token ids) and print
  the advice; ``--csv`` also writes the findings, ``--step-time`` the MFU of a step timed at SECONDS.
- ``trace FILE [FILE ...] [--spec NAME] [--csv OUT] [--top N]``: a torch.profiler trace diagnosed op by op
  (:func:`perfkit.diagnose_trace`, :mod:`perfkit.trace.cli`).

Exit codes: 0 success, 1 an experiment failed, 2 bad usage (unknown experiment, CPU recording into
the repository's ``data/``), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
from pathlib import Path

import pandas as pd

from .experiments.record import RecordingFailed, archive, record
from .experiments.registry import REGISTRY as registry
from .data import data_root, recordings
from .calibration import calibrate, current_device
from .devices import cuda_available
from .environment import environment
from .published_data import HOW_TO_GET, PublishedDataMissing, published_root, published_sources
from .published_data.fetch import main as fetch_main
from .validation import validation_frames, validation_table, worst_predictions
from .book.check_your_model.report import peer_table, print_report, validation_report
from .trace import cli as trace_cli


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="perfkit", description="Measure and record deep-learning GPU performance.")
    sub = p.add_subparsers(dest="command", required=True,
                           metavar="{info,list,published,validate,record,advise,calibrate,trace}")
    sub.add_parser("info", help="this device's spec and the software versions")
    pl = sub.add_parser("list", help="registered experiments and recordings found")
    pl.add_argument("--data", metavar="DIR", default=None,
                    help="recordings folder (default: $PERFKIT_DATA, else the repository's data/)")
    pp = sub.add_parser("published", help="published third-party tables: list them, or fetch them from their sources",
                        add_help=False)
    pp.add_argument("rest", nargs=argparse.REMAINDER, metavar="{list,fetch} ...")
    pv = sub.add_parser("validate", help="every prediction against every published table and recording in data/: "
                                         "GEMMs, the op families, the real models' ops, steps and fixes, targets")
    pv.add_argument("--worst", type=int, default=0, metavar="N", help="also print the N worst predictions per source")
    pv.add_argument("--by", default=None, metavar="COLUMN", help="also split by this column, e.g. layout")
    pv.add_argument("--data", metavar="DIR", default=None, help="recordings folder (default: data/)")
    pv.add_argument("--gemm-only", action="store_true", help="only the GEMM model against the GEMM tables")
    pv.add_argument("--no-models", action="store_true", help="skip the real models (advising them needs torch)")
    pr = sub.add_parser("record", help="run experiments and write their CSV + JSON recordings")
    pr.add_argument("experiments", nargs="*", metavar="EXPERIMENT", help="experiment names (default: all)")
    pr.add_argument("--out", metavar="DIR", default="data",
                    help="output folder; files go to DIR/<device-slug>/ (default: data)")
    pr.add_argument("--quick", action="store_true", help="small sweeps (tests, CPU runs)")
    pr.add_argument("--archive", metavar="FILE.tar.gz", default=None,
                    help="also pack DIR into this single .tar.gz (even after a failure or interrupt)")
    pr.add_argument("--no-progress", action="store_true", help="no progress bars")
    pr.add_argument("--no-resume", action="store_true",
                    help="measure everything again: never skip a recording complete today at this commit, "
                         "never continue an incomplete one")
    pa = sub.add_parser("advise", help="the book's rules applied to a model built by a factory function")
    pa.add_argument("factory", metavar="MODULE:FUNCTION", help="e.g. perfkit.zoo:resnet50 (called with no arguments)")
    pa.add_argument("--input", action="append", required=True, metavar="SHAPE[:DTYPE]",
                    help="an input's shape, e.g. 8x3x224x224 or 8x1024:int64; repeat for several inputs")
    pa.add_argument("--dtype", default="bfloat16", help="the dtype the model runs in (default bfloat16)")
    pa.add_argument("--spec", default=None, help="device name, e.g. H100-SXM (default: this GPU, else H100-SXM)")
    pa.add_argument("--inference", action="store_true", help="advise a forward pass (default: a training step)")
    pa.add_argument("--no-meta", action="store_true", help="build and run the model for real (not on meta)")
    pa.add_argument("--csv", metavar="FILE", default=None, help="also write the findings to this CSV file")
    pa.add_argument("--step-time", metavar="SECONDS", type=float, default=None,
                    help="a step's measured time: also print its model FLOPs utilization (MFU)")
    pc = sub.add_parser("calibrate", help="measure this device's achievable ceilings (about a minute), save them")
    speed = pc.add_mutually_exclusive_group()
    speed.add_argument("--quick", action="store_true", help="a smaller search (about 15 s)")
    speed.add_argument("--thorough", action="store_true", help="also a wide grid search, to compare with")
    pc.add_argument("--dtype", action="append", default=None, metavar="DTYPE",
                    help="a dtype to calibrate (repeat; default: every one this device runs)")
    pc.add_argument("--out", metavar="FILE.json", default=None, help="save the profile here (default: the user's cache)")
    pc.add_argument("--no-save", action="store_true", help="print the report, save nothing")
    pc.add_argument("--no-progress", action="store_true", help="no progress bar")
    trace_cli.add_parser(sub)
    return p


@contextlib.contextmanager
def _sigterm_interrupts():
    """Inside the block SIGTERM raises KeyboardInterrupt (a recording keeps its rows, a calibration
    writes nothing); the previous handler afterwards."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    except ValueError:  # not the main thread
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _calibrate(args: argparse.Namespace) -> int:
    try:
        with _sigterm_interrupts():
            result = calibrate(quick=args.quick, thorough=args.thorough, dtypes=args.dtype, out=args.out,
                               save=not args.no_save, progress=not args.no_progress)
    except (TypeError, ValueError, LookupError) as e:
        print(f"perfkit calibrate: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("perfkit calibrate: interrupted; nothing was written", file=sys.stderr)
        return 130
    print(result)
    return 0


def _input(text: str, meta: bool):
    """A tensor of zeros of the shape (and dtype) ``8x3x224x224[:dtype]`` describes."""
    import torch

    shape_text, _, dtype_text = text.partition(":")
    try:
        shape = tuple(int(d) for d in shape_text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--input must look like 8x3x224x224 or 8x1024:int64, got {text!r}") from None
    if not shape or min(shape) < 1:
        raise ValueError(f"--input needs positive dimensions, got {text!r}")
    dtype = getattr(torch, dtype_text or "float32", None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"--input dtype {dtype_text!r} is not a torch dtype (e.g. float32, int64)")
    return torch.zeros(shape, dtype=dtype, device="meta" if meta else "cpu")


def _advise(args: argparse.Namespace) -> int:
    import torch

    from .advisor import advise  # torch: imported for this command only, so `perfkit list` stays quick

    module_name, _, attr = args.factory.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr) if attr else None
    except (ImportError, AttributeError) as e:
        print(f"perfkit advise: cannot load {args.factory!r}: {e}", file=sys.stderr)
        return 2
    if not callable(factory):
        print(f"perfkit advise: {args.factory!r} must name a function, as module:function", file=sys.stderr)
        return 2
    meta = not args.no_meta
    try:
        inputs = tuple(_input(text, meta) for text in args.input)
        with torch.device("meta") if meta else contextlib.nullcontext():
            model = factory()
        spec = args.spec if args.spec is not None or not cuda_available() else current_device()  # calibrated
        advice = advise(model, inputs if len(inputs) > 1 else inputs[0], args.dtype, spec,
                        training=not args.inference, meta=meta)
        mfu = advice.mfu(args.step_time) if args.step_time is not None else None
    except (TypeError, ValueError, LookupError) as e:
        print(f"perfkit advise: {e}", file=sys.stderr)
        return 2
    print(advice)
    if mfu is not None:
        print(f"measured step of {args.step_time:g} s: {mfu}")
    if args.csv:
        advice.findings.to_csv(args.csv, index=False)
        print(f"findings written to {args.csv}")
    return 0


def _runtime_rows(env: dict) -> list[tuple[str, str, str]]:
    """``perfkit info``'s GPU runtime rows: CUDA's (an NVIDIA GPU, or none), or ROCm's for torch's
    ROCm build (AMD GPUs through ``torch.cuda``; nothing there is called CUDA)."""
    if env.get("hip"):
        return [("GPU runtime", f"ROCm {env['hip']}", "torch.version.hip (torch's ROCm build)"),
                ("AMD GPU available", str(env["cuda_available"]), "torch.cuda.is_available() (ROCm)"),
                ("AMD driver", env["driver"] or "unknown", "/sys/module/amdgpu/version")]
    return [("CUDA available", str(env["cuda_available"]), "torch.cuda.is_available()"),
            ("NVIDIA driver", env["driver"] or "none", "pynvml / nvidia-smi"),
            ("CUDA (torch)", env["cuda"] or "none", "torch.version.cuda")]


def _info() -> int:

    spec = current_device()
    print(spec.describe())
    env = environment()
    print()
    rows = [
        *_runtime_rows(env),
        ("torch", env["torch"] or "not installed", "torch.__version__"),
        ("triton", env["triton"] or "not installed", "triton.__version__"),
        ("cupy", env["cupy"] or "not installed", "cupy.__version__"),
        ("perfkit", env["perfkit"], "perfkit.__version__"),
        ("perfkit commit", env["perfkit_commit"] or "unknown (not a git checkout, or no commit yet)", "git rev-parse HEAD"),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:<{w1}}  {c}")
    return 0


def _list(data: str | None) -> int:

    print("experiments:")
    experiments = registry.items()  # each experiment's module imported (its figures are not)
    if not experiments:
        print("  (none registered)")
    w = max((len(n) for n, _ in experiments), default=0)
    for name, exp in experiments:
        needs = ",".join(exp.needs) or "-"
        first = exp.description.strip().splitlines()[0] if exp.description.strip() else ""
        print(f"  {name:<{w}}  needs: {needs:<18} {first}")
    _print_table(f"recordings in {data_root(data)}", recordings(data),
                 ["device_slug", "experiment", "recorded_at", "rows", "complete"])
    _print_published(published_sources(), full=False)
    return 0


def _print_published(table, *, full: bool) -> None:
    """The published tables perfkit knows, where it looks for them, and how to get the missing ones."""

    try:
        where = f"in {published_root()}"
    except PublishedDataMissing:
        where = "(no published-data folder here)"
    table = table.assign(rows=table["rows"].map(lambda r: "-" if r is None or r != r else str(int(r))),
                         here=table["available"].map({True: "yes", False: "no"}))
    _print_table(f"published third-party tables {where}", table,
                 ["source", "devices", "rows", "here", "date", "commit", "licence"])
    if full:
        for r in table.itertuples():
            print(f"\n{r.source}: {r.title}\n  publisher: {r.publisher}; chapters: {r.chapters or '-'}"
                  f"\n  timing: {r.timing}")
    if not table["available"].all():
        print(f"  missing tables: {HOW_TO_GET}")


def _published(rest: list[str]) -> int:

    if not rest or rest[0] == "list":
        if rest[1:]:
            print(f"perfkit published list: takes no arguments, got {' '.join(rest[1:])}", file=sys.stderr)
            return 2
        _print_published(published_sources(), full=True)
        return 0
    if rest[0] == "fetch":
        return fetch_main(rest[1:])
    if rest[0] in ("-h", "--help"):
        print("usage: perfkit published [list | fetch [NAME ...] [--into DIR] [--mirror URL=PATH ...] "
              "[--allow-mismatch]]")
        return 0
    print(f"perfkit published: unknown action {rest[0]!r}; use list or fetch", file=sys.stderr)
    return 2


def _print_table(title: str, table, columns: list[str]) -> None:
    print(f"\n{title}:")
    lines = table[columns].to_string(index=False).splitlines() if len(table) else ["(none)"]
    print("\n".join("  " + line for line in lines))


def _validate(args: argparse.Namespace) -> int:
    code = _validate_gemms(args.worst, args.by, args.data)
    if code == 2 or args.gemm_only:
        return code
    reports = validation_report(args.data, models=not args.no_models)
    print_report(reports, None if args.no_models else peer_table(reports))
    return 1 if any(r.problems for r in reports) else code


def _validate_gemms(worst: int, by: str | None = None, root: str | None = None) -> int:
    frames = validation_frames(root)
    try:
        table = validation_table(frames, by=by)
    except ValueError as e:
        print(f"perfkit validate: {e}", file=sys.stderr)
        return 2
    if not len(table):
        print("no published or recorded GEMMs in data/ to check the model against")
        return 1
    with pd.option_context("display.width", 200, "display.max_colwidth", 80):
        for label, part in table.groupby("data", sort=False):
            print(f"\n{label}")
            shown = part.drop(columns="data").copy()
            for c in ("median_abs", "p90_abs", "optimistic"):
                shown[c] = shown[c].map("{:.1%}".format)
            print(shown.to_string(index=False))
        for name, frame in frames.items() if worst > 0 else ():
            cols = [c for c in ("M", "N", "K", "layout", "dtype", "time_s", "predicted_s", "error")
                    if c in frame or c == "error"]
            print(f"\nworst {worst} of {name}:")
            print(worst_predictions(frame, worst)[cols].to_string(index=False))
    return 0


def _raise_interrupt(signum, frame):  # SIGTERM → KeyboardInterrupt, so a recording saves its rows
    raise KeyboardInterrupt


def _record(args: argparse.Namespace) -> int:

    unknown = [n for n in args.experiments if n not in registry]
    if unknown:
        print(f"perfkit record: unknown experiment(s) {', '.join(map(repr, unknown))}; "
              f"registered: {', '.join(registry.names()) or 'none'}", file=sys.stderr)
        return 2
    code = 0
    try:
        with _sigterm_interrupts():
            record(args.experiments or None, args.out, quick=args.quick, progress=not args.no_progress,
                   resume=not args.no_resume)
    except ValueError as e:
        print(f"perfkit record: {e}", file=sys.stderr)
        return 2
    except RecordingFailed as e:
        print(f"perfkit record: {e}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("perfkit record: interrupted; the rows measured so far are kept", file=sys.stderr)
        code = 130
    if args.archive:
        if Path(args.out).is_dir():
            path = archive(args.out, args.archive)
            print(f"perfkit: archived {args.out} → {path}")
        else:
            print(f"perfkit record: nothing to archive, {args.out} does not exist", file=sys.stderr)
            code = code or 1
    return code


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or bad usage (2)
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    if args.command == "info":
        return _info()
    if args.command == "list":
        return _list(args.data)
    if args.command == "published":
        return _published(args.rest)
    if args.command == "validate":
        return _validate(args)
    if args.command == "advise":
        return _advise(args)
    if args.command == "calibrate":
        return _calibrate(args)
    if args.command == "trace":
        return trace_cli.run(args)
    return _record(args)


if __name__ == "__main__":
    sys.exit(main())
