#!/usr/bin/env bash
# B-Cache E10 on a small machine: instructions per packet per worker (valgrind callgrind, one
# output per thread), case #4 with the bench's generated entries and traffic (`--traffic` is
# single-threaded) and the cache on, for 1..N workers. Delta
# method as in bcache_callgrind.sh: each worker's Ir at N2 packets minus at N1, over the packets
# that worker handled (the bench's per-worker packet counts are not printed, so the delta is
# divided by (N2 - N1) / workers: flows are spread evenly by the flow hash on average).
# Usage (repository root): bench/bcache_workers_callgrind.sh  (T = binary, default
# target/release/tern; WORKERS="1 2"; N1, N2 packets). On a larger machine measure throughput
# instead: for n in 1 2 4 8 ...; do target/release/tern bench p4/bcache/case4.p4
# --bcache --workers $n --packets 4000000 --runs 3; done (bench/quiet.sh first).
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-target/release/tern}
N1=${N1:-20000}
N2=${N2:-60000}
WORKERS=${WORKERS:-"1 2"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$T" compile p4/bcache/case4.p4 -o "$tmp/case4.json" >/dev/null
ir() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
printf '%-8s %-8s %14s\n' workers thread instr/packet
for w in $WORKERS; do
    for n in $N1 $N2; do
        valgrind --tool=callgrind --separate-threads=yes \
            --callgrind-out-file="$tmp/w$w.$n.cg" "$T" bench "$tmp/case4.json" \
            --bcache --workers "$w" --packets "$n" --runs 1 --latency-samples 0 \
            --stage-packets 0 >"$tmp/w$w.$n.out" 2>/dev/null
    done
    # One file per thread (suffix -NN); the busiest ones are the workers.
    for f in "$tmp"/w$w.$N2.cg-*; do
        t=${f##*-}
        a=$(ir "$tmp/w$w.$N1.cg-$t" 2>/dev/null || echo 0)
        b=$(ir "$f")
        printf '%-8s %-8s %14d\n' "$w" "$t" $(( (b - ${a:-0}) * w / (N2 - N1) ))
    done
done
