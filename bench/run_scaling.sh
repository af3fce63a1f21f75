#!/usr/bin/env bash
# tern bench over pipeline lengths, worker counts and an update storm; JSON to bench/data/,
# the printed reports to bench/raw_scaling.txt. Then scripts/plot-bench.sh draws the plots.
# Usage (repository root): bench/run_scaling.sh   (builds target/release/tern first)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p tern
T=target/release/tern
D=bench/data
mkdir -p "$D"
LOG=bench/raw_scaling.txt
{
    echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) nproc=$(nproc) load: $(cut -d' ' -f1-3 /proc/loadavg)"
    tmp=$(mktemp -d)
    for n in 0 1 2 5 10 20; do
        python3 scripts/gen_pipeline.py "$n" "$tmp/pipeline$n.p4"
        echo "## pipeline with $n exact tables + LPM"
        $T bench "$tmp/pipeline$n.p4" --packets 1000000 --json "$D/pipeline_$n.json"
    done
    rm -rf "$tmp"
    for p in l3_router l2l3_acl_nat; do
        echo "## $p, one thread"
        $T bench "p4/bench/$p.p4" --json "$D/single_$p.json"
    done
    for w in 1 2 3 4; do
        echo "## l3_router, $w workers"
        $T bench p4/bench/l3_router.p4 --workers "$w" --json "$D/workers_$w.json"
    done
    for w in 1 2; do
        echo "## l3_router, $w workers, 10k updates/s"
        $T bench p4/bench/l3_router.p4 --workers "$w" --update-rate 10000 --json "$D/storm_w$w.json"
    done
} 2>/dev/null | tee "$LOG"
