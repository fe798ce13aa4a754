#!/usr/bin/env bash
# Everything a CUDA machine should run, in one go: the GPU tests, the examples in both forms, the
# benchmarks, and (with --sanitize) the compute-sanitizer job. Logs go to $OUT (default /tmp/ptxdsl-gpu),
# the sanitizer's to $SANITIZE_LOGS (default $OUT/sanitize), the differential suite's summary to
# $OUT/differential-summary.json.
#
#   tests/gpu_all.sh [--sanitize]
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/ptxdsl-gpu}         # the differential suite writes differential-summary.json here
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-gpu}
PY=${PYTHON:-python3}
status=0
step() {            # step NAME COMMAND...: run it, keep its log, remember a failure
    local name=$1
    shift
    echo "== $name: $*"
    "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || { echo "== $name: exit $rc"; status=1; }
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
# several GPUs and pytest-xdist: one worker per GPU (the ptxdsl plugin gives each worker its own GPU; the
# differential summary adds up the workers' counts); XDIST="" runs in one process anyway
if [ -z "${XDIST+set}" ]; then
    XDIST=
    if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -gt 1 ] && "$PY" -c "import xdist" 2>/dev/null; then
        XDIST="-n auto"
    fi
fi
# shellcheck disable=SC2086
step gpu-tests "$PY" -m pytest -q -p no:cacheprovider -m gpu -rs --durations=20 $XDIST tests
step examples "$PY" -m ptxdsl.cli run examples/tma_* examples/tensormap_replace.py examples/pipe_*.py
step bench-build "$PY" bench/bench_build.py --repeat 200
step bench-copy "$PY" bench/bench_copy.py
step bench-kernels "$PY" bench/bench_kernels.py --rows 128,1024,16384
step bench-launch "$PY" bench/bench_launch.py
step bench-start "$PY" bench/bench_start.py --repeat 3
if [ "${1:-}" = "--sanitize" ]; then
    LOGS="${SANITIZE_LOGS:-$OUT/sanitize}" PYTHON="$PY" step sanitize tests/gpu_sanitize.sh
fi
exit $status
