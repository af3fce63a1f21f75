#!/usr/bin/env bash
# Repeats FarReach runs with storage servers SIGKILLed and restarted (`tern kv up --kill-server`)
# under the history checker, and counts the runs with a violation (stale / unknown / mixed).
# Loopback mode by default (server processes, the switch in a `tern kv sim-switch` process that
# the switch OS drives over Thrift, as in netns mode; no root needed); `MODE=netns` (root) runs
# the namespaces topology of `kv_netns.rs`.
#
# Usage: scripts/kv-kill-stress.sh TERN_BINARY [RUNS]
# Knobs (environment): MODE (loopback), KILLS (3), PERIOD_MS (600), DOWN_MS (1500: longer than
# the switch OS's 1 s of write-back retries, so evictions of a dead server's keys give up),
# THREADS (16), OPS (3000), KEYS (100), CACHE_SIZE (20), TIMEOUT_MS (300).
# Each run's output is kept in $OUT (default: a temporary directory, printed) as run-N.log.
set -uo pipefail
tern=${1:?usage: $0 TERN_BINARY [RUNS]}
runs=${2:-10}
mode=${MODE:-loopback}
out=${OUT:-$(mktemp -d -t tern-kv-kill-stress-XXXXXX)}
mkdir -p "$out"
bad=0
for i in $(seq 1 "$runs"); do
    dir=$(mktemp -d -t tern-kv-kill-run-XXXXXX)
    "$tern" kv up --mode "$mode" --servers 2 --cache farreach \
        --cache-size "${CACHE_SIZE:-20}" --hot-threshold 2 --sample-all --snapshot-ms 300 \
        --kill-server "${KILLS:-3}" --crash-period-ms "${PERIOD_MS:-600}" \
        --server-down-ms "${DOWN_MS:-1500}" --dir "$dir/data" --stats-file "$dir/stats.json" \
        -- tern kv check --keys "${KEYS:-100}" --timeout-ms "${TIMEOUT_MS:-300}" \
        --threads "${THREADS:-16}" --ops "${OPS:-3000}" >"$out/run-$i.log" 2>&1
    rc=$?
    # Control messages given up (the switch OS's: eviction write-backs among them; in netns
    # mode the switch OS logs to its own file, so the stats are the only place to see them).
    gave_up=$(grep -o '"control_gave_up": *[0-9]*' "$dir/stats.json" 2>/dev/null | grep -o '[0-9]*$')
    rm -rf "$dir"
    line=$(grep -m1 'violations:' "$out/run-$i.log" || echo "no checker line (exit $rc)")
    kills=$(grep -c 'killed (SIGKILL)' "$out/run-$i.log")
    echo "run $i: exit $rc, $kills kills, ${gave_up:-?} control messages given up; $line"
    if ! grep -q 'violations: 0 stale, 0 unknown value, 0 value/seq mixed' "$out/run-$i.log"; then
        bad=$((bad + 1))
        grep -A12 'violations:' "$out/run-$i.log" | grep 'key ' | head -3
    fi
done
echo "$bad of $runs runs with a violation (logs in $out)"
