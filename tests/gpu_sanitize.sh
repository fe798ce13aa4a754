#!/usr/bin/env bash
# Run every GPU test (the examples' included) under compute-sanitizer memcheck, racecheck and synccheck
# in one go and print per-tool counts. Per tool: the GPU suite must report 0 errors, and the planted
# bugs that tool can see (tests/test_debug_gpu.py -k planted) must be reported. Exit 0 when both hold
# for every tool. Options by environment: TOOLS="memcheck racecheck synccheck", SUITE (test paths, default
# tests), PLANTED (see below), PLANTED_TIMEOUT (seconds per planted run, default 120), COMPUTE_SANITIZER,
# PYTHON, HYPOTHESIS_PROFILE (default ci, to bound the sanitizer's slowdown), PYTEST_ARGS (appended).
set -u
cd "$(dirname "$0")/.."

CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -n 1)}
if [ -z "$CS" ] || [ ! -x "$CS" ]; then
    echo "gpu_sanitize: compute-sanitizer not found (set COMPUTE_SANITIZER)" >&2
    exit 2
fi
TOOLS=${TOOLS:-"memcheck racecheck synccheck"}
PY=${PYTHON:-python}
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/ptxdsl-sanitize.XXXXXX")
status=0

errors_in() {       # errors over the logs of one run (one log per process): "ERROR SUMMARY: N errors", or
                    # racecheck's "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"; "?" if none
    cat "$@" 2>/dev/null | sed -n -e 's/.*ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' \
        -e 's/.*RACECHECK SUMMARY: [0-9]* hazards* displayed (\([0-9][0-9]*\) errors*, \([0-9][0-9]*\) warnings*).*/\1 \2/p' \
        | awk '{s += $1 + $2; n++} END {if (n) print s; else print "?"}'
}

tests_in() {        # pytest's final "N passed, M skipped ..." line
    grep -E '^[0-9]+ (passed|failed|skipped|error)|^=+ .*(passed|failed|skipped)' "$1" | tail -n 1 | sed 's/=//g; s/^ *//; s/ in [0-9.]*s.*//'
}

run() {             # run TOOL NAME LIMIT PYTEST-ARGS...: sanitize one pytest run (LIMIT seconds, 0 = none),
                    # logs under $LOGS/TOOL-NAME.*; prints pytest's exit status (124: over the limit)
    local tool=$1 name=$2 limit=$3
    shift 3
    PTXDSL_SANITIZER=$tool timeout "$limit" "$CS" --tool "$tool" --target-processes all --print-limit 200 \
        --log-file "$LOGS/$tool-$name.%p.log" \
        "$PY" -m pytest -q -p no:cacheprovider -m gpu "$@" ${PYTEST_ARGS:-} > "$LOGS/$tool-$name.pytest" 2>&1
    echo $?
}

# planted bugs: tool:test-name-part:expect (the tool must report it) or info (measured not to; printed only)
PLANTED=${PLANTED:-"racecheck:planted_phase_race:expect racecheck:planted_tma_race:info synccheck:planted_divergent_bar:expect"}

echo "compute-sanitizer: $("$CS" --version | tail -n 1); logs in $LOGS"
printf '%-10s %-44s %s\n' tool "GPU suite (expect 0 errors)" verdict
for tool in $TOOLS; do
    # shellcheck disable=SC2086
    rc=$(run "$tool" suite 0 ${SUITE:-tests} -k "not planted")
    errors=$(errors_in "$LOGS/$tool-suite."*.log)
    verdict=ok
    if [ "$rc" != 0 ] || [ "$errors" != 0 ]; then
        verdict="FAIL (pytest exit $rc; see $LOGS/$tool-suite.*)"
        status=1
    fi
    printf '%-10s %-44s %s\n' "$tool" "$errors errors, $(tests_in "$LOGS/$tool-suite.pytest")" "$verdict"
done
printf '%-10s %-24s %-10s %s\n' tool "planted bug" errors verdict
for item in $PLANTED; do
    tool=${item%%:*}; rest=${item#*:}; name=${rest%%:*}; want=${rest#*:}
    case " $TOOLS " in *" $tool "*) ;; *) continue ;; esac
    rc=$(run "$tool" "$name" "${PLANTED_TIMEOUT:-120}" tests/test_debug_gpu.py -k "$name")
    errors=$(errors_in "$LOGS/$tool-$name."*.log)
    if [ "$rc" != 0 ]; then
        verdict="FAIL (pytest exit $rc; see $LOGS/$tool-$name.*)"
        status=1
    elif [ "$want" = info ]; then
        verdict="not required (this tool is not expected to see it)"
    elif [ "$errors" = 0 ] || [ "$errors" = "?" ]; then
        verdict="FAIL: not reported (see $LOGS/$tool-$name.*)"
        status=1
    else
        verdict="ok: reported, and the static verifier rejects it too"
    fi
    printf '%-10s %-24s %-10s %s\n' "$tool" "$name" "$errors" "$verdict"
done
exit $status
