#!/usr/bin/env bash
# The one script a GPU machine runs: record the book's measurements, run the GPU tests, run every
# chapter, and pack the results into a few files.
#
#   OUT=/path/to/out bash scripts/gpu_run.sh [--quick] [--only STEP[,STEP...]] [--loan]
#                                            [--budget SECONDS] [--tests-budget SECONDS]
#                                            [--experiments "NAME NAME ..."] [--chapters "NN NN ..."]
#                                            [--keep] [--dry-run]
#
#   OUT           output folder (default ./gpu_out)
#   PERFKIT_RECORD_DIR  the record and traces steps' folder (default /tmp/perfkit_record): the recording
#                 goes to $PERFKIT_RECORD_DIR/data, the traces to $PERFKIT_RECORD_DIR/data/<slug>/traces,
#                 and the calibration's device_profile.json is copied there too.
#                 It is never emptied, so it survives between calls on the same warm machine (where $OUT
#                 is emptied before every call): a second record step skips each experiment already
#                 recorded completely today at this commit and resumes the incomplete ones.
#                 `rm -rf /tmp/perfkit_record` starts afresh.
#   PERFKIT_COMMIT the commit being recorded, for the metadata, when the tree has no .git
#                 (e.g. PERFKIT_COMMIT=$(git rev-parse HEAD) from the machine that sent the tree);
#                 without either, the commit is unknown and a rerun measures every experiment again
#   --quick       pass --quick to `perfkit record` and to the traces (small sweeps, shrunk models)
#   --only STEPS  run just these steps, comma-separated, always in the order below:
#                 calibrate | kernels | record | traces | tests | bench | chapters | labs
#                 (calibrate: first, `perfkit calibrate --thorough`: the GPU's measured ceilings, which
#                 the book's predictions for this GPU use once device_profile.json is committed)
#                 (kernels: the GPU tests of perfkit's own kernels, first, since the recordings
#                 of the experiments that time them are worthless if a kernel is wrong)
#                 (traces: scripts/record_traces.py, our own torch.profiler traces of one step of
#                 ResNet-50, GPT-2 small and a LLaMA decode, each gzipped and at most 3 MB)
#                 (labs: scripts/time_labs.py, each workshop lab's live runs predicted, then timed)
#   --loan        the first call of a short GPU loan (about 15 minutes of device time in all, start-up
#                 included; one command may run 10 minutes): --only calibrate,record,traces,labs with
#                 --budget 300 and the experiments of $LOAN_EXPERIMENTS below, unless --only,
#                 --budget or --experiments say otherwise. About 7 minutes on an H200 (see
#                 data/README.md, "A short GPU loan"). The second call is `--only tests`.
#   --budget S    time budget of the record step in seconds (default 480 = 8 minutes); when it
#                 runs out the recorder is interrupted (SIGINT) and keeps the rows measured so far;
#                 run the record step again to measure the rest
#   --tests-budget S  time budget of the tests step in seconds (default 540); at the budget pytest is
#                 interrupted (SIGINT) and reports what ran
#   --experiments "NAME NAME ..."  record only these experiments (names from `python -m perfkit list`;
#                 default: all), e.g. --only record --experiments "gemm_sizes waves"
#   --chapters "NN NN ..."  the chapters step runs only these (their numbers: "01 03" runs
#                 chapters/01_*.md and chapters/03_*.md; default: every chapter)
#   --keep        also leave a copy of the recording in $OUT/data, and keep the loose $OUT/figures
#                 folder after packing it
#   --dry-run     check the arguments, print the steps and commands that would run, and stop
#                 (nothing is run, written or installed)
#
# What comes back in $OUT (at most 8 files, no folders unless --keep; when every step runs,
# the step logs are only inside results.tar.gz):
#   info.log             nvidia-smi and `python -m perfkit info`
#   device_profile.json  the calibration's profile: commit it as data/<device-slug>/device_profile.json
#                        (a later call brings it back with: cp /tmp/perfkit_record/device_profile.json "$OUT"/)
#   record.log           the recording's output (time per experiment)
#   recording.tar.gz     data/<device-slug>/<experiment>.csv|.json: everything in
#                        $PERFKIT_RECORD_DIR/data, earlier calls' recordings included; unpack, then copy
#                        the <device-slug>/ folder into the repository's data/
#   traces.tar.gz        <device-slug>/traces/<run>.json.gz and <run>.json (its metadata): unpack into
#                        the repository's data/
#   kernels.log          `pytest -m gpu` of the kernel tests (persistent RNN, Triton GEMM, spin)
#   gpu_tests.log        `pytest -m gpu`
#   bench.log            scripts/bench_kernels.py: ratios against references measured in the same run
#   chapters.log         scripts/run_chapters.py
#   labs.log, labs.csv   scripts/time_labs.py: each lab's live runs, predicted and measured
#   results.tar.gz       the logs, labs.csv, summary.txt and figures/*.png
#   summary.txt          pass/fail and time per step
#
# Every step runs even if an earlier one failed; the exit status is non-zero if any failed.
# One device command may run at most 10 minutes: run the steps as separate calls with --only
# (record, then tests, then bench and chapters) when the whole script would take longer.
# torch is never installed or upgraded: perfkit is used from this checkout through PYTHONPATH.

set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-./gpu_out}"
QUICK=""
ONLY=""
BUDGET=""
TESTS_BUDGET=540
KEEP=0
LOAN=0
DRY=0
EXPERIMENTS=()
CHAPTERS=()
STEPS=(calibrate kernels record traces tests bench chapters labs)
# What the first call of a short loan records: the re-recordings issue 45 asks for (the int8 layout,
# the fused attention rows) and the experiments added since the last H200 recording.
LOAN_EXPERIMENTS="ceiling_matmul advisor_layers advisor_fixes model_steps model_op_dtypes batchnorm_channels layernorm_sizes embedding_sizes"
RECORD_DIR="${PERFKIT_RECORD_DIR:-/tmp/perfkit_record}"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK="--quick"; shift ;;
        --only) [ $# -ge 2 ] || { echo "gpu_run.sh: --only needs steps: ${STEPS[*]} (comma-separated)" >&2; exit 2; }
            [ -n "$2" ] || { echo "gpu_run.sh: --only got no step; steps: ${STEPS[*]} (comma-separated)" >&2; exit 2; }
            ONLY="$2"; shift 2 ;;
        --budget) [ $# -ge 2 ] || { echo "gpu_run.sh: --budget needs seconds" >&2; exit 2; }
            BUDGET="$2"; shift 2 ;;
        --tests-budget) [ $# -ge 2 ] || { echo "gpu_run.sh: --tests-budget needs seconds" >&2; exit 2; }
            TESTS_BUDGET="$2"; shift 2 ;;
        --loan) LOAN=1; shift ;;
        --dry-run) DRY=1; shift ;;
        --experiments)
            [ $# -ge 2 ] || { echo "gpu_run.sh: --experiments needs names, e.g. \"gemm_sizes waves\"" >&2; exit 2; }
            read -r -a EXPERIMENTS <<< "$2"
            [ "${#EXPERIMENTS[@]}" -gt 0 ] || { echo "gpu_run.sh: --experiments got no experiment name" >&2; exit 2; }
            for name in "${EXPERIMENTS[@]}"; do
                case "$name" in
                    ''|-*|*[!A-Za-z0-9_]*) echo "gpu_run.sh: --experiments takes names like gemm_sizes" \
                        "(python -m perfkit list), got '$name'" >&2; exit 2 ;;
                esac
            done
            shift 2 ;;
        --chapters)
            [ $# -ge 2 ] || { echo "gpu_run.sh: --chapters needs chapter numbers, e.g. \"01 03\"" >&2; exit 2; }
            read -r -a NUMBERS <<< "$2"
            [ "${#NUMBERS[@]}" -gt 0 ] || { echo "gpu_run.sh: --chapters got no chapter number" >&2; exit 2; }
            for n in "${NUMBERS[@]}"; do
                found=("$REPO"/chapters/"$n"_*.md)
                case "$n" in
                    [0-9][0-9]) [ -f "${found[0]}" ] || { echo "gpu_run.sh: --chapters: no chapters/${n}_*.md" >&2; exit 2; } ;;
                    *) echo "gpu_run.sh: --chapters takes two-digit chapter numbers like 01, got '$n'" >&2; exit 2 ;;
                esac
                CHAPTERS+=("chapters/$(basename "${found[0]}")")
            done
            shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "gpu_run.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
if [ "$LOAN" -eq 1 ]; then
    [ -n "$ONLY" ] || ONLY="calibrate,record,traces,labs"
    [ -n "$BUDGET" ] || BUDGET=300
fi
[ -n "$BUDGET" ] || BUDGET=480
WANTED=()
if [ -n "$ONLY" ]; then
    IFS=',' read -r -a WANTED <<< "$ONLY"
    [ "${#WANTED[@]}" -gt 0 ] || { echo "gpu_run.sh: --only got no step; steps: ${STEPS[*]}" >&2; exit 2; }
    for w in "${WANTED[@]}"; do
        case " ${STEPS[*]} " in
            *" $w "*) ;;
            *) echo "gpu_run.sh: --only takes steps from: ${STEPS[*]} (comma-separated), got '$w'" >&2; exit 2 ;;
        esac
    done
fi
case "$BUDGET" in
    ''|*[!0-9]*) echo "gpu_run.sh: --budget must be a whole number of seconds, got '$BUDGET'" >&2; exit 2 ;;
esac
case "$TESTS_BUDGET" in
    ''|*[!0-9]*) echo "gpu_run.sh: --tests-budget must be a whole number of seconds, got '$TESTS_BUDGET'" >&2; exit 2 ;;
esac
wants() { [ "${#WANTED[@]}" -eq 0 ] || [[ " ${WANTED[*]} " == *" $1 "* ]]; }
if [ "$LOAN" -eq 1 ] && [ "${#EXPERIMENTS[@]}" -eq 0 ] && wants record; then
    read -r -a EXPERIMENTS <<< "$LOAN_EXPERIMENTS"
fi
if [ "${#EXPERIMENTS[@]}" -gt 0 ] && ! wants record; then
    echo "gpu_run.sh: --experiments is for the record step, but --only is '$ONLY'" >&2; exit 2
fi
if [ "${#CHAPTERS[@]}" -gt 0 ] && ! wants chapters; then
    echo "gpu_run.sh: --chapters is for the chapters step, but --only is '$ONLY'" >&2; exit 2
fi
case "$RECORD_DIR" in
    "") echo "gpu_run.sh: PERFKIT_RECORD_DIR is empty" >&2; exit 2 ;;
    /*) ;;
    *) RECORD_DIR="$PWD/$RECORD_DIR" ;;
esac

if [ "$DRY" -eq 1 ]; then
    PY="${PYTHON:-$(command -v python || command -v python3 || echo python)}"
    echo "gpu_run.sh --dry-run: OUT=$OUT, PERFKIT_RECORD_DIR=$RECORD_DIR; nothing is run. Steps, in order:"
    for w in "${STEPS[@]}"; do
        wants "$w" || continue
        case "$w" in
            calibrate) echo "  calibrate  $PY -m perfkit calibrate --thorough --no-progress --out $OUT/device_profile.json" ;;
            kernels)   echo "  kernels    $PY -m pytest -m gpu tests/core/test_persistent_rnn.py tests/core/test_kernels.py" ;;
            record)    echo "  record     timeout -s INT $BUDGET $PY -m perfkit record ${EXPERIMENTS[*]:-(all)} --out $RECORD_DIR/data $QUICK" ;;
            traces)    echo "  traces     $PY scripts/record_traces.py --out $RECORD_DIR/data $QUICK → $OUT/traces.tar.gz" ;;
            tests)     echo "  tests      timeout -s INT $TESTS_BUDGET $PY -m pytest -m gpu tests (the chapters' end-to-end test left to the chapters step)" ;;
            bench)     echo "  bench      $PY scripts/bench_kernels.py" ;;
            chapters)  echo "  chapters   $PY scripts/run_chapters.py ${CHAPTERS[*]:-(every chapter)} --out $OUT/figures" ;;
            labs)      echo "  labs       $PY scripts/time_labs.py --out $OUT/labs.csv" ;;
        esac
    done
    exit 0
fi

mkdir -p "$OUT" || exit 2
OUT="$(cd "$OUT" && pwd)"
cd "$REPO" || exit 2
PY="${PYTHON:-$(command -v python || command -v python3)}"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg

# The GPU machine has torch, triton, cupy, pandas and matplotlib but no Jupyter stack and no network:
# the chapters need plotly (interactive figures), ipywidgets and tqdm. Bring them as wheels made here
# (pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d wheelhouse
# "ipywidgets>=8.1,<9" tqdm plotly==7.1.0) and carried with the tree; torch is never touched.
if [ -d "$REPO/wheelhouse" ]; then
    "$PY" -m pip install -q --no-index --find-links "$REPO/wheelhouse" ipywidgets tqdm plotly \
        || echo "warning: could not install ipywidgets/tqdm/plotly from wheelhouse/" >&2
fi

SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
FAILED=0
T_START=$SECONDS

note() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME LOG COMMAND...: run, tee to LOG, record status and time
step() {
    local name="$1" log="$2"; shift 2
    local t0=$SECONDS rc
    echo; echo "=================== $name: $*"
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    local dt=$((SECONDS - t0))
    local status
    if { [ "$name" = tests ] || [ "$name" = kernels ]; } && [ "$rc" -eq 5 ]; then
        status="ok (no gpu tests collected)"
    elif [ "$rc" -eq 0 ]; then
        status="ok"
    elif [ "$name" = record ] && [ "$rc" -eq 124 ]; then
        status="FAILED: over the ${BUDGET} s budget"; FAILED=1
    elif [ "$name" = tests ] && [ "$rc" -eq 124 ]; then
        status="FAILED: over the ${TESTS_BUDGET} s budget"; FAILED=1
    else
        status="FAILED (exit $rc)"; FAILED=1
    fi
    note "$(printf '%-9s %-34s %5d s' "$name" "$status" "$dt")"
}

{
    echo "=================== nvidia-smi"
    nvidia-smi || echo "(nvidia-smi not available)"
    echo; echo "=================== python -m perfkit info"
    "$PY" -m perfkit info
} 2>&1 | tee "$OUT/info.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { note "$(printf '%-9s %-34s' info FAILED)"; FAILED=1; }

if wants calibrate; then
    rm -f "$OUT/device_profile.json"
    step calibrate "$OUT/calibrate.log" "$PY" -m perfkit calibrate --thorough --no-progress \
        --out "$OUT/device_profile.json"
    # $OUT is emptied before the next call: keep a copy where the recording survives.
    if [ -f "$OUT/device_profile.json" ]; then
        mkdir -p "$RECORD_DIR" && cp "$OUT/device_profile.json" "$RECORD_DIR/" \
            || echo "warning: could not copy device_profile.json into $RECORD_DIR" >&2
    fi
fi

if wants kernels; then
    step kernels "$OUT/kernels.log" "$PY" -m pytest -m gpu -q tests/core/test_persistent_rnn.py tests/core/test_kernels.py \
        -p no:cacheprovider -o addopts="" -o testpaths=tests
fi

if wants record; then
    # $RECORD_DIR is not emptied: a rerun skips what is complete today at this commit and resumes the rest.
    rm -f "$OUT/recording.tar.gz"
    mkdir -p "$RECORD_DIR" || exit 2
    if [ -z "${PERFKIT_COMMIT:-}" ] && [ "$(git -C "$REPO" rev-parse --show-toplevel 2>/dev/null)" != "$REPO" ]; then
        echo "warning: no .git and PERFKIT_COMMIT unset: the recording's perfkit_commit is null, so a rerun" \
            "measures every experiment again" >&2
    fi
    # SIGINT at the budget: the recorder saves what it measured (complete=false) and archives it.
    step record "$OUT/record.log" timeout -s INT -k 60 "$BUDGET" \
        "$PY" -m perfkit record ${EXPERIMENTS[@]+"${EXPERIMENTS[@]}"} --out "$RECORD_DIR/data" \
        --archive "$OUT/recording.tar.gz" --no-progress $QUICK
    if [ "$KEEP" -eq 1 ] && [ -d "$RECORD_DIR/data" ] && ! [ "$RECORD_DIR/data" -ef "$OUT/data" ]; then
        rm -rf "$OUT/data" && cp -r "$RECORD_DIR/data" "$OUT/data"
    fi
fi

if wants traces; then
    # Our own torch.profiler traces, written beside the recording (they survive between calls too).
    rm -f "$OUT/traces.tar.gz"
    mkdir -p "$RECORD_DIR/data" || exit 2
    step traces "$OUT/traces.log" "$PY" scripts/record_traces.py --out "$RECORD_DIR/data" --no-progress $QUICK
    TRACE_DIRS=()
    for d in "$RECORD_DIR"/data/*/traces; do
        [ -d "$d" ] && TRACE_DIRS+=("data/${d#"$RECORD_DIR"/data/}")
    done
    if [ "${#TRACE_DIRS[@]}" -gt 0 ]; then
        tar -czf "$OUT/traces.tar.gz" -C "$RECORD_DIR" "${TRACE_DIRS[@]}" || FAILED=1
    fi
fi

if wants tests; then
    # The chapters are their own step (run_chapters.py): their end-to-end test is left out here. SIGINT
    # at the budget: pytest stops and prints what passed and failed so far.
    step tests "$OUT/gpu_tests.log" timeout -s INT -k 30 "$TESTS_BUDGET" \
        "$PY" -m pytest -m gpu -q --durations=20 tests -p no:cacheprovider -o addopts="" -o testpaths=tests \
        --continue-on-collection-errors --ignore=tests/book/test_book.py \
        --deselect tests/book/test_gpu_runs.py::test_every_chapter_runs_as_a_script_on_the_gpu
fi

if wants bench; then
    step bench "$OUT/bench.log" "$PY" scripts/bench_kernels.py
fi

if wants chapters; then
    rm -rf "$OUT/figures"
    step chapters "$OUT/chapters.log" "$PY" scripts/run_chapters.py ${CHAPTERS[@]+"${CHAPTERS[@]}"} --out "$OUT/figures"
fi

if wants labs; then
    step labs "$OUT/labs.log" "$PY" scripts/time_labs.py --out "$OUT/labs.csv"
fi

note "$(printf '%-9s %-34s %5d s' total "$([ "$FAILED" -eq 0 ] && echo ok || echo FAILED)" $((SECONDS - T_START)))"

# Pack logs, summary and figures into one file; drop the loose folders (the tars hold them).
PACK=()
for f in info.log calibrate.log kernels.log record.log traces.log gpu_tests.log bench.log chapters.log labs.log labs.csv summary.txt figures; do
    [ -e "$OUT/$f" ] && PACK+=("$f")
done
tar -czf "$OUT/results.tar.gz" -C "$OUT" "${PACK[@]}" || FAILED=1
if [ "$KEEP" -eq 0 ]; then
    rm -rf "$OUT/figures"
    # The device tool brings back at most 8 files: when every step ran, the step logs stay only
    # inside results.tar.gz.
    if [ "$(find "$OUT" -maxdepth 1 -type f | wc -l)" -gt 8 ]; then
        rm -f "$OUT"/calibrate.log "$OUT"/kernels.log "$OUT"/record.log "$OUT"/traces.log "$OUT"/gpu_tests.log \
            "$OUT"/bench.log \
            "$OUT"/chapters.log "$OUT"/labs.log "$OUT"/labs.csv
    fi
fi

echo; echo "=================== summary ($OUT)"
cat "$SUMMARY"
ls -l "$OUT"
exit $FAILED
