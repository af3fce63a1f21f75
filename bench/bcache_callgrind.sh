#!/usr/bin/env bash
# Behaviour cache (B-Cache) cost in exact instructions per packet (valgrind callgrind, delta
# method as in run_callgrind.sh: Ir(N2) - Ir(N1) over N2 - N1 packets, so loading, compiling
# and entry installation cancel out), per program in three modes:
#   off  - no cache (the native pipeline);
#   hit  - --bcache: the warm-up pass inserts every flow, the timed packets all hit;
#   miss - --bcache --bcache-admission cm:65000: every packet misses and is never admitted
#          (key packing, hashing, probe and count-min update on top of the pipeline).
# Usage (repository root): bench/bcache_callgrind.sh   (needs target/release/tern and
# valgrind; PROGS="a.p4 b.p4" overrides the programs, T the binary, D the output folder;
# CASE_TRAFFIC=1 sends p4/bcache/caseN.p4 its own contents and flows, `--traffic caseN`,
# instead of the bench's generic entries, and names the outputs bcache_instr_caseN_traffic)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-target/release/tern}
D=${D:-bench/data}
N1=${N1:-20000}
N2=${N2:-60000}
PROGS=${PROGS:-"p4/bench/l3_router.p4 p4/bench/l2l3_acl_nat.p4 p4/bench/pipeline20.p4 p4/bcache/case4.p4"}
mkdir -p "$D"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
printf '%-16s %10s %10s %10s %8s %8s\n' program off hit miss hit/off miss/off
for prog in $PROGS; do
    name=$(basename "$prog" .p4)
    traffic=()
    if [ -n "${CASE_TRAFFIC:-}" ] && [[ $name == case[1-4] ]]; then
        traffic=(--traffic "$name")
        name=${name}_traffic
    fi
    "$T" compile "$prog" -o "$tmp/$name.json" >/dev/null
    declare -A per=()
    for mode in off hit miss; do
        case $mode in
            off) extra=() ;;
            hit) extra=(--bcache) ;;
            miss) extra=(--bcache --bcache-admission cm:65000) ;;
        esac
        for n in $N1 $N2; do
            valgrind --tool=callgrind --callgrind-out-file="$tmp/$name.$mode.$n.cg" \
                "$T" bench "$tmp/$name.json" --packets "$n" --runs 1 --latency-samples 0 \
                --stage-packets 0 "${traffic[@]}" "${extra[@]}" >"$tmp/$name.$mode.$n.out" 2>/dev/null
        done
        a=$(ir "$tmp/$name.$mode.$N1.cg")
        b=$(ir "$tmp/$name.$mode.$N2.cg")
        per[$mode]=$(( (b - a) / (N2 - N1) ))
    done
    hits=$(sed -n 's/.*bcache: lookups \([0-9]*\), hits \([0-9]*\).*/\2\/\1/p' "$tmp/$name.hit.$N2.out")
    printf '%-16s %10d %10d %10d %7.2fx %7.3fx  (hits %s)\n' "$name" "${per[off]}" "${per[hit]}" \
        "${per[miss]}" "$(echo "${per[off]} / ${per[hit]}" | bc -l)" \
        "$(echo "${per[miss]} / ${per[off]}" | bc -l)" "$hits"
    echo "{\"program\":\"$name\",\"instr_per_packet\":{\"off\":${per[off]},\"hit\":${per[hit]},\"miss\":${per[miss]}},\"hits\":\"$hits\",\"n1\":$N1,\"n2\":$N2}" \
        >"$D/bcache_instr_$name.json"
    unset per
done
