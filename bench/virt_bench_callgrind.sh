#!/usr/bin/env bash
# Instructions per packet of each side of `tern virt bench --timed`, counted in the bench's own
# timed loops (valgrind callgrind, --toggle-collect on one loop at a time; delta method:
# Ir(N2) - Ir(N1) over N2 - N1 packets, so that set-up and the loop's fixed cost cancel out):
#   native      time_native        the bare switches one packet per call, each hop's frame
#                                  passed by hand to the next (the programs' own work)
#   sliced      time_slice         one VirtSwitch::process_each session
#   native32    time_native_batch  the bare switches in bursts of 32
#   sliced32    time_slice_batch   VirtSwitch::process_burst in batches of 32
# and the slice's added cost (sliced - native) absolute and in per cent, for every row whose
# name contains ONLY (default: all rows). Exact and repeatable where timing is not: this is
# the figure to compare variants by; the timed figures then say what it is worth.
# Usage (repository root): bench/virt_bench_callgrind.sh
#   TERN  the tern binary (default target/release/tern: cargo build --release -p tern)
#   ONLY  the rows to count (passed to --only; default every row, one at a time)
#   N1 N2 packets of the two runs (default 2000, 12000)
set -euo pipefail
cd "$(dirname "$0")/.."
TERN=${TERN:-target/release/tern}
N1=${N1:-2000}
N2=${N2:-12000}
command -v valgrind >/dev/null || { echo "virt_bench_callgrind: valgrind is not installed" >&2; exit 2; }
[ -x "$TERN" ] || { echo "virt_bench_callgrind: no tern binary at $TERN (cargo build --release -p tern)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${ONLY:-}" ]; then
    rows=("$ONLY")
else
    # One distinct part of each row's name (`--only` takes the rows whose name contains it).
    rows=("L2 switch" "firewall" "router" "(answered)" "(forwarded)" "Ex. 1 B" "Ex. 1 C (" "merged native")
fi
ir() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
count() { # count ROW FUNCTION N -> Ir
    valgrind --tool=callgrind --toggle-collect="tern::cmd_virt::bench::$2" \
        --callgrind-out-file="$tmp/cg" "$TERN" virt bench --timed --runs 1 --packets "$3" \
        --only "$1" --scenarios p4/virt/scenarios --out "$tmp/out" --no-plot >/dev/null 2>&1
    ir "$tmp/cg"
}
printf '%-30s %9s %9s %9s %9s %9s %9s\n' row native sliced added native32 sliced32 added32
for row in "${rows[@]}"; do
    declare -A per=()
    for f in time_native time_slice time_native_batch time_slice_batch; do
        a=$(count "$row" "$f" "$N1")
        b=$(count "$row" "$f" "$N2")
        per[$f]=$(( (b - a) / (N2 - N1) ))
    done
    pct() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%+.1f%%", 100 * (s - n) / n }'; }
    printf '%-30s %9d %9d %9s %9d %9d %9s\n' "$row" "${per[time_native]}" "${per[time_slice]}" \
        "$(( per[time_slice] - per[time_native] )) $(pct "${per[time_slice]}" "${per[time_native]}")" \
        "${per[time_native_batch]}" "${per[time_slice_batch]}" \
        "$(pct "${per[time_slice_batch]}" "${per[time_native_batch]}")"
done
