#!/usr/bin/env bash
# Run every GPU test (the examples' included) under compute-sanitizer memcheck, racecheck and synccheck
# in one go (the tools side by side, PARALLEL=0 for one after another) and print per-tool counts. Per tool:
# the GPU suite must report 0 errors, and the planted bugs that tool can see (tests/test_debug_gpu.py -k
# planted) must be reported. Exit 0 when both hold for every tool.
# Options by environment: TOOLS="memcheck racecheck synccheck", SUITE (test paths, default tests), PLANTED
# and KNOWN (see below; empty: none), PLANTED_TIMEOUT (seconds per planted run, default 120), SUITE_TIMEOUT (seconds
# per tool's suite, default 0 = none), PARALLEL (default 1), COMPUTE_SANITIZER, PYTHON, HYPOTHESIS_PROFILE
# (default ci, to bound the sanitizer's slowdown), PTXDSL_DIFF_CASES (differential cases, default 120),
# PYTEST_ARGS (appended), LOGS (default a new temporary directory).
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
export PTXDSL_DIFF_CASES=${PTXDSL_DIFF_CASES:-120}
export PTXDSL_LINE_INFO=1       # .loc lines and the JIT's line table: reports name the builder calls
LOGS=${LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/ptxdsl-sanitize.XXXXXX")}
mkdir -p "$LOGS"

# planted bugs: tool:test-name-part:expect (the tool must report it) or info (measured not to; printed only)
PLANTED=${PLANTED-"racecheck:planted_phase_race:expect racecheck:planted_tma_race:info synccheck:planted_divergent_bar:expect"}
# correct kernels a tool reports anyway, skipped in its suite run and run here on their own, the count
# printed (never a failure): tool:pytest-node-id (docs/hardware-notes.md says why each is here)
KNOWN=${KNOWN-"memcheck:tests/test_isa_gpu.py::test_bulk_copies_round_trip[False-local]"}

errors_in() {       # errors over the logs of one run (one log per process): "ERROR SUMMARY: N errors", or
                    # racecheck's "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"; "?" if none
    cat "$@" 2>/dev/null | sed -n -e 's/.*ERROR SUMMARY: \([0-9][0-9]*\) errors*$/\1/p' \
        -e 's/.*RACECHECK SUMMARY: [0-9]* hazards* displayed (\([0-9][0-9]*\) errors*, \([0-9][0-9]*\) warnings*).*/\1 \2/p' \
        | awk '{s += $1 + $2; n++} END {if (n) print s; else print "?"}'
}

lines_in() {        # the .py/.ptxd lines the device frames of a tool's reports name ("at KERNEL+0x40 in
                    # FILE:LINE", from line info), comma separated; host frames are left out
    cat "$@" 2>/dev/null | grep -oE '[A-Za-z0-9_]+\+0x[0-9a-f]+ in [^ ]*\.(py|ptxd):[0-9]+' \
        | sed 's/.* in //; s/.*\///' | sort -u | paste -sd, -
}

tests_in() {        # pytest's final "N passed, M skipped ..." line
    grep -E '^[0-9]+ (passed|failed|skipped|error)|^=+ .*(passed|failed|skipped)' "$1" | tail -n 1 | sed 's/=//g; s/^ *//; s/ in [0-9.]*s.*//'
}

run() {             # run TOOL NAME LIMIT PYTEST-ARGS...: sanitize one pytest run (LIMIT seconds, 0 = none),
                    # logs under $LOGS/TOOL-NAME.*; prints pytest's exit status (124: over the limit)
    local tool=$1 name=$2 limit=$3
    shift 3
    local start=$SECONDS
    # the differential suite writes its summary and mismatches to $OUT: one folder per run
    mkdir -p "$LOGS/$tool-$name.out"
    local api=()
    # the driver errors the runtime tests provoke on purpose (bad PTX, rejected tensor maps) are theirs to
    # check: each must come back as a ptxdsl error; memcheck would count every one
    [ "$tool" = memcheck ] && api=(--report-api-errors no)
    OUT="$LOGS/$tool-$name.out" PTXDSL_SANITIZER=$tool timeout "$limit" "$CS" --tool "$tool" "${api[@]}" --target-processes all \
        --print-limit 200 --log-file "$LOGS/$tool-$name.%p.log" \
        "$PY" -m pytest -q -p no:cacheprovider -rs -m gpu "$@" ${PYTEST_ARGS:-} > "$LOGS/$tool-$name.pytest" 2>&1
    local rc=$?
    echo "$((SECONDS - start))" > "$LOGS/$tool-$name.seconds"
    echo $rc
}

tool_job() {        # tool_job TOOL: its suite, its planted bugs and its known reports; the rows go to
                    # $LOGS/TOOL.rows, a failure to $LOGS/TOOL.failed
    local tool=$1 rc errors verdict item rest name want node
    # shellcheck disable=SC2086
    rc=$(run "$tool" suite "${SUITE_TIMEOUT:-0}" ${SUITE:-tests} -k "not planted")
    errors=$(errors_in "$LOGS/$tool-suite."*.log)
    verdict=ok
    if [ "$rc" != 0 ] || [ "$errors" != 0 ]; then
        verdict="FAIL (pytest exit $rc; see $LOGS/$tool-suite.*)"
        touch "$LOGS/$tool.failed"
    fi
    printf '%-10s %-50s %-6s %-40s %s\n' "$tool" "GPU suite (expect 0)" "$errors" \
        "$(tests_in "$LOGS/$tool-suite.pytest"), $(cat "$LOGS/$tool-suite.seconds") s" "$verdict" >> "$LOGS/$tool.rows"
    for item in $PLANTED; do
        [ "${item%%:*}" = "$tool" ] || continue
        rest=${item#*:}; name=${rest%%:*}; want=${rest#*:}
        rc=$(run "$tool" "$name" "${PLANTED_TIMEOUT:-120}" tests/test_debug_gpu.py -k "$name")
        errors=$(errors_in "$LOGS/$tool-$name."*.log)
        if [ "$rc" != 0 ]; then
            verdict="FAIL (pytest exit $rc; see $LOGS/$tool-$name.*)"
            touch "$LOGS/$tool.failed"
        elif [ "$want" = info ]; then
            verdict="not required (this tool is not expected to see it)"
        elif [ "$errors" = 0 ] || [ "$errors" = "?" ]; then
            verdict="FAIL: not reported (see $LOGS/$tool-$name.*)"
            touch "$LOGS/$tool.failed"
        else
            verdict="ok: reported at $(lines_in "$LOGS/$tool-$name."*.log); the static verifier rejects it too"
        fi
        printf '%-10s %-50s %-6s %-40s %s\n' "$tool" "planted: $name" "$errors" \
            "$(tests_in "$LOGS/$tool-$name.pytest")" "$verdict" >> "$LOGS/$tool.rows"
    done
    for item in $KNOWN; do
        [ "${item%%:*}" = "$tool" ] || continue
        node=${item#*:}
        name=known-$(echo "$node" | tr -c 'A-Za-z0-9_\n' '_')
        rc=$(PTXDSL_SANITIZER_KNOWN=1 run "$tool" "$name" "${PLANTED_TIMEOUT:-120}" "$node")
        errors=$(errors_in "$LOGS/$tool-$name."*.log)
        # informational: the tool may abort the launch it reports, so the test itself may fail under it
        if [ "$errors" = 0 ] || [ "$errors" = "?" ]; then
            verdict="no longer reported (pytest exit $rc): take it off KNOWN"
        else
            verdict="reported on a correct kernel at $(lines_in "$LOGS/$tool-$name."*.log) (pytest exit $rc)"
        fi
        printf '%-10s %-50s %-6s %-40s %s\n' "$tool" "known: ${node##*::}" "$errors" \
            "$(tests_in "$LOGS/$tool-$name.pytest")" "$verdict" >> "$LOGS/$tool.rows"
    done
}

echo "compute-sanitizer: $("$CS" --version | tail -n 1); logs in $LOGS; tools: $TOOLS (parallel=${PARALLEL:-1})"
rm -f "$LOGS"/*.rows "$LOGS"/*.failed
for tool in $TOOLS; do
    if [ "${PARALLEL:-1}" = 1 ]; then tool_job "$tool" & else tool_job "$tool"; fi
done
wait
printf '%-10s %-50s %-6s %-40s %s\n' tool run errors pytest verdict
status=0
for tool in $TOOLS; do
    cat "$LOGS/$tool.rows"
    [ -e "$LOGS/$tool.failed" ] && status=1
done
exit $status
