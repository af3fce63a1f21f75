#!/usr/bin/env bash
# tern's whole test suite, from a fresh Debian 12 machine with the Rust toolchain.
# Installs what the suite needs (system packages), then runs format, lint and all tests.
# Usage: scripts/test.sh            (CI calls this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

# --- system packages -------------------------------------------------------------------
scripts/setup.sh --test

# --- Rust components ----------------------------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# run_step OUT SECONDS CMD...: CMD under a kill timeout, its output on the console and in OUT;
# the suite's status keeps the first failure, step_rc this step's.
status=0
run_step() {
    local out=$1 secs=$2
    shift 2
    timeout --signal=KILL "$secs" "$@" 2>&1 | tee "$out"
    step_rc=${PIPESTATUS[0]}
    [ "$step_rc" -eq 137 ] && echo "$*: killed after $secs s (it hung)"
    [ "$status" -eq 0 ] && status=$step_rc
    return 0
}

# Everything the tests write to the temporary folder goes to one scratch folder of the suite's
# own, which must be empty again at the end (scripts/leftovers.sh also checks for processes,
# network namespaces and interfaces the tests left behind, and fails the suite if there are any).
SUITE_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tern-suite.XXXXXX")
LEFTOVER_STATE=$(mktemp -d "${TMPDIR:-/tmp}/tern-suite-state.XXXXXX")
trap 'rm -rf "$SUITE_TMP" "$LEFTOVER_STATE"' EXIT
scripts/leftovers.sh snapshot "$LEFTOVER_STATE"
export TMPDIR="$SUITE_TMP"

# Test outputs go to target/; the binary to wherever cargo builds (CARGO_TARGET_DIR is honoured).
TERN_BIN="${CARGO_TARGET_DIR:-target}/debug/tern"

log "cargo test"
mkdir -p target
set +e
# A hung test fails the suite in 25 minutes instead of eating CI's whole budget.
run_step target/test-output.txt 1500 cargo test --workspace --no-fail-fast

# P4Runtime against the real client: p4runtime-shell (PyPI) in .venv-p4rt.
log "p4runtime-shell tests (tests/p4runtime)"
cargo build -q -p tern
run_step target/p4rt-output.txt 600 tests/p4runtime/run.sh "$TERN_BIN"
p4rt_rc=$step_rc

# BMv2's own simple_switch_CLI (PyPI, in .venv-stockcli) against tern's Thrift server: the 5
# CLI golden tests and the fixtures' command files. Prints "stockcli: N passed, M failed".
log "stock simple_switch_CLI tests (tests/stock-cli)"
run_step target/stockcli-output.txt 300 tests/stock-cli/run.sh "$TERN_BIN"
stockcli_rc=$step_rc

# PTF (ptf + scapy) over veth pairs, and the tutorials' triangle of three switches pinging:
# both need root and skip ("skipping: ...") otherwise. Each prints "NAME: N passed, M failed".
log "PTF tests (tests/ptf)"
run_step target/ptf-output.txt 300 tests/ptf/run.sh "$TERN_BIN"
ptf_rc=$step_rc
log "P4Runtime tutorial triangle (tests/tutorial)"
run_step target/tutorial-output.txt 300 tests/tutorial/run.sh "$TERN_BIN"
tutorial_rc=$step_rc

# tern kv's plots: a tiny report drawn with scripts/kv-plot.sh (matplotlib in .venv-plot).
log "tern kv plot (scripts/kv-plot.sh)"
kv_tmp=$(mktemp -d)
timeout --signal=KILL 600 "$TERN_BIN" kv bench --local 1 --records 200 --ops 400 --threads 2 \
    --json "$kv_tmp/r.json" --plot "$kv_tmp/r.png" && [ -s "$kv_tmp/r.png" ]
plot_status=$?
rm -rf "$kv_tmp"
[ "$status" -eq 0 ] && status=$plot_status

log "leftovers (processes, namespaces, interfaces, temporary files)"
scripts/leftovers.sh check "$LEFTOVER_STATE" "$SUITE_TMP" "$PWD"
leftover_status=$?
[ "$status" -eq 0 ] && status=$leftover_status
set -e

# One closing line for the whole suite, summed over every test binary. (No pipefail here: a
# grep that finds nothing, e.g. no "skipped" in pytest's line, must not end the script.)
set +o pipefail
passed=$(grep -Eo '[0-9]+ passed;' target/test-output.txt | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '[0-9]+ failed;' target/test-output.txt | awk '{s+=$1} END {print s+0}')
ignored=$(grep -Eo '[0-9]+ ignored;' target/test-output.txt | awk '{s+=$1} END {print s+0}')
# pytest's summary line: "N passed, M failed, K skipped in T s".
p4rt_summary=$(tail -n 3 target/p4rt-output.txt | grep -E '(passed|failed)' | tail -n 1)
p_pass=$(grep -Eo '[0-9]+ passed' <<<"$p4rt_summary" | awk '{print $1}')
p_fail=$(grep -Eo '[0-9]+ (failed|error)' <<<"$p4rt_summary" | awk '{s+=$1} END {print s+0}')
p_skip=$(grep -Eo '[0-9]+ skipped' <<<"$p4rt_summary" | awk '{print $1}')
# A step that failed before printing its summary (e.g. its venv could not be made) is one failure.
[ -z "$p4rt_summary" ] && [ "$p4rt_rc" -ne 0 ] && p_fail=1
passed=$((passed + ${p_pass:-0} + (plot_status == 0 ? 1 : 0) + (leftover_status == 0 ? 1 : 0)))
failed=$((failed + ${p_fail:-0} + (plot_status == 0 ? 0 : 1) + (leftover_status == 0 ? 0 : 1)))
ignored=$((ignored + ${p_skip:-0}))
for step in "target/stockcli-output.txt $stockcli_rc" "target/ptf-output.txt $ptf_rc" \
    "target/tutorial-output.txt $tutorial_rc"; do
    read -r f rc <<<"$step"
    line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed$' "$f" | tail -n 1)
    if [ -z "$line" ] && [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
    elif [ -n "$line" ]; then
        passed=$((passed + $(grep -Eo '[0-9]+ passed' <<<"$line" | awk '{print $1}')))
        failed=$((failed + $(grep -Eo '[0-9]+ failed' <<<"$line" | awk '{print $1}')))
    elif grep -q '^skipping:' "$f"; then
        ignored=$((ignored + 1))
    fi
done
echo
echo "tern: ${passed} passed, ${failed} failed, ${ignored} skipped"
exit "$status"
