#!/usr/bin/env bash
# Instructions per packet (exact, reproducible) of `tern bench` programs with valgrind's
# callgrind, by the delta method: Ir(N2 packets) - Ir(N1 packets), over N2 - N1, so loading,
# compiling and entry installation cancel out. Writes bench/data/instr_*.json and, for the L3
# router, the per-function delta profile to bench/data/profile_l3_router.txt.
# Usage (repository root): bench/run_callgrind.sh   (needs target/release/tern and valgrind;
# ONLY=l3_router runs one program; T=path/to/tern and D=output/dir override the defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-target/release/tern}
D=${D:-bench/data}
N1=${N1:-20000}
N2=${N2:-60000}
mkdir -p "$D"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
progs=()
for n in 0 1 2 5 10 20; do
    python3 scripts/gen_pipeline.py "$n" "$tmp/pipeline$n.p4"
    progs+=("pipeline_$n:$tmp/pipeline$n.p4")
done
progs+=("l3_router:p4/bench/l3_router.p4" "l2l3_acl_nat:p4/bench/l2l3_acl_nat.p4")
ir() { # total instructions of a callgrind output file
    grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'
}
for entry in "${progs[@]}"; do
    name=${entry%%:*}
    prog=${entry#*:}
    if [ -n "${ONLY:-}" ] && [ "$name" != "$ONLY" ]; then continue; fi
    for n in $N1 $N2; do
        valgrind --tool=callgrind --callgrind-out-file="$tmp/$name.$n.cg" \
            $T bench "$prog" --packets "$n" --runs 1 --latency-samples 0 --stage-packets 0 \
            >/dev/null 2>&1
    done
    a=$(ir "$tmp/$name.$N1.cg")
    b=$(ir "$tmp/$name.$N2.cg")
    per=$(( (b - a) / (N2 - N1) ))
    tables=$($T bench "$prog" --packets 32 --runs 1 --latency-samples 0 --stage-packets 0 2>/dev/null \
        | sed -n 's/.*program: \([0-9]*\) tables.*/\1/p')
    echo "{\"program\":\"$name\",\"tables\":$tables,\"instr_per_packet\":$per,\"n1\":$N1,\"n2\":$N2}" \
        | tee "$D/instr_$name.json"
    if [ "$name" = l3_router ]; then
        for n in $N1 $N2; do
            callgrind_annotate --auto=no --threshold=100 "$tmp/$name.$n.cg" >"$tmp/$name.$n.txt" 2>/dev/null
            callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$tmp/$name.$n.cg" >"$tmp/$name.$n.inc.txt" 2>/dev/null
        done
        {
            python3 scripts/cg_delta.py "$tmp/$name.$N1.txt" "$tmp/$name.$N2.txt" $((N2 - N1)) self
            python3 scripts/cg_delta.py "$tmp/$name.$N1.inc.txt" "$tmp/$name.$N2.inc.txt" $((N2 - N1)) inclusive
        } >"$D/profile_l3_router.txt"
    fi
done
