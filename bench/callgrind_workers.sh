#!/usr/bin/env bash
# Scaling by instructions (issue 21 step 5, for machines with few cores): the L3 router run by
# `tern bench --workers W` (in memory) and `tern run --workers W` (pcap files, traffic of
# bench/gen_l3_pcap.py) under callgrind with one output per thread, delta of N2 and N1
# packets. Prints, per W, the instructions per packet summed over every thread (what one
# packet costs the machine: it grows with W by the cross-worker cost) and each thread's share
# (its delta over the N2 - N1 packets; for a worker, times W is its cost per packet it
# handled). A perfectly scaling W-worker run has the same total as W = 1 and W workers each
# carrying 1/W of it; the main thread of `tern run` (reading, dispatch, in-order writing) is
# the serial part that bounds the speed-up (Amdahl). Each row also gives the main thread
# (thread 1) and the sum of every other thread (and that sum / W: a worker's share).
# Usage (repository root): bench/callgrind_workers.sh   (T = binary, default
# target/release/tern; WORKERS="1 2 4"; N1/N2 packets, default 20,000 / 60,000; ONLY=bench or
# ONLY=run for one of the two)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-target/release/tern}
T=$(cd "$(dirname "$T")" && pwd)/$(basename "$T")
N1=${N1:-20000}
N2=${N2:-60000}
WORKERS=${WORKERS:-"1 2 4"}
P=$PWD/p4/bench/l3_router.p4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
# Per thread of one W: "thread instr/packet" lines, then the total over threads.
report() { # kind W
    local total=0 line=""
    for f in "$tmp/$1.$2.$N2.cg"-*; do
        t=${f##*-}
        a=$(ir "$tmp/$1.$2.$N1.cg-$t" 2>/dev/null || echo 0)
        b=$(ir "$f")
        d=$(( b - ${a:-0} ))
        total=$(( total + d ))
        # Threads with (almost) no per-packet work (start-up, control) are left out.
        if [ $(( d / (N2 - N1) )) -ge 5 ]; then
            line="$line thread $t: $(( d / (N2 - N1) ));"
        fi
    done
    # Thread 1 is the main thread; every other thread's delta summed (`tern run` on mapped
    # files starts its worker threads per window of packets, so they are many short threads).
    local main_t other
    main_t=$(( $(ir "$tmp/$1.$2.$N2.cg-01") - $(ir "$tmp/$1.$2.$N1.cg-01") ))
    other=$(( total - main_t ))
    line="$line main: $(( main_t / (N2 - N1) )); all other threads: $(( other / (N2 - N1) )), per worker $(( other / (N2 - N1) / $2 ));"
    echo "| $1 | $2 | $(( total / (N2 - N1) )) |$line |"
}
echo "| command | workers | instructions/packet, all threads | per thread (share of every packet) |"
echo "|---|---:|---:|---|"
if [ "${ONLY:-bench}" = bench ]; then
    for w in $WORKERS; do
        for n in $N1 $N2; do
            valgrind --tool=callgrind --separate-threads=yes \
                --callgrind-out-file="$tmp/bench.$w.$n.cg" "$T" bench "$P" --workers "$w" \
                --packets "$n" --runs 1 --latency-samples 0 --stage-packets 0 >/dev/null 2>&1
        done
        report bench "$w"
    done
fi
if [ "${ONLY:-run}" = run ]; then
    for n in $N1 $N2; do
        mkdir -p "$tmp/in.$n"
        python3 bench/gen_l3_pcap.py "$tmp/in.$n" "$n" >/dev/null
    done
    for w in $WORKERS; do
        for n in $N1 $N2; do
            rm -rf "$tmp/w" && cp -r "$tmp/in.$n" "$tmp/w"
            (cd "$tmp/w" && valgrind --tool=callgrind --separate-threads=yes \
                --callgrind-out-file="$tmp/run.$w.$n.cg" "$T" run "$P" --use-files 0 \
                -i 0@p0 -i 1@p1 -i 2@p2 -i 3@p3 -i 4@p4 --commands routes.txt --workers "$w" \
                >/dev/null 2>&1)
        done
        report run "$w"
    done
fi
