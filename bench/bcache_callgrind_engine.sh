#!/usr/bin/env bash
# Behaviour cache (B-Cache) engine cost in exact instructions per packet (valgrind callgrind,
# delta method: Ir at N2 packets minus Ir at N1, over N2 - N1; set-up, JIT compilation and
# the warm-up pass cancel out) with crates/tern-dataplane/examples/bcache_cost.rs: the
# differential harness's table contents and 1,024 generated flows, round-robin, in three modes
#   off  - no cache;   hit - cache, every flow inserted by the warm-up;
#   miss - cache with admission cm:65000 (every packet misses, nothing admitted).
# Needs an optimised build of the example, e.g. (what bench/RESULTS.md used; the dev profile
# with opt-level 3, no LTO — a release build gives other absolute numbers):
#   cargo build --config 'profile.cg.inherits="dev"' --config 'profile.cg.opt-level=3' \
#     --config 'profile.cg.debug-assertions=false' --config 'profile.cg.overflow-checks=false' \
#     --profile cg -p tern-dataplane --example bcache_cost
# or `cargo build --release -p tern-dataplane --example bcache_cost` (then B=target/release/...).
# Usage (repository root): bench/bcache_callgrind_engine.sh PROG.json...
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-target/cg/examples/bcache_cost}
N1=${N1:-2000}
N2=${N2:-6000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
printf '%-22s %8s %8s %8s %8s %8s\n' program off hit miss off/hit miss/off
for json in "$@"; do
    name=$(basename "$json" .json)
    declare -A per=()
    for mode in off hit miss; do
        for n in $N1 $N2; do
            valgrind --tool=callgrind --callgrind-out-file="$tmp/$name.$mode.$n.cg" \
                "$B" "$json" "$mode" "$n" >"$tmp/$name.$mode.$n.out" 2>/dev/null
        done
        a=$(ir "$tmp/$name.$mode.$N1.cg")
        b=$(ir "$tmp/$name.$mode.$N2.cg")
        per[$mode]=$(( (b - a) / (N2 - N1) ))
    done
    printf '%-22s %8d %8d %8d %7.2fx %+7.1f%%\n' "$name" "${per[off]}" "${per[hit]}" "${per[miss]}" \
        "$(echo "${per[off]} / ${per[hit]}" | bc -l)" \
        "$(echo "100 * (${per[miss]} - ${per[off]}) / ${per[off]}" | bc -l)"
    grep -h -E '^(ingress|egress):' "$tmp/$name.hit.$N2.out" | sed 's/^/    hit run /' | cut -c1-140
    unset per
done
