#!/usr/bin/env bash
# Cost of a tern-virt slice and chain in exact instructions per packet (valgrind callgrind,
# delta method: Ir(N2) - Ir(N1) over N2 - N1 packets, so loading, JIT compilation and entry
# installation cancel out). Runs crates/tern-virt/examples/slice_cost.rs in each mode:
#   native / slice          - basic.p4 with one /32 route, bare Switch vs inside a VirtSwitch
#                             (catch-all rule, 1:1 port map), one packet per call;
#   native32 / slice32      - the same in batches of 32;
#   pair / chain            - firewall then router as two bare switches vs a chain over a link
#                             (also pair32 / chain32: batches of 32, the pair running each
#                             hop's frames as one batch);
#   ex1b_native32 / ex1b32  - HyPer4's Example 1 phase B (L2 - FW - L2) in batches of 32: the
#                             three switches with the scenario's command files in turn, each
#                             hop's frames as one batch, vs p4/virt/scenarios/ex1 sliced;
#   ex1c_native32 / ex1c32  - the same for phase C (L2 - [ARP -> FW -> R] - L2, five hops);
#   native_l2 / slice_l2    - as native / slice with p4/virt/l2_switch.p4 (source MAC known,
#                             destination forwarded): the cheapest program, where the slice's
#                             fixed cost per packet weighs most (also native_l232 / slice_l232);
#   fn_native:F / fn:F         - HyPer4's function F (l2, fw, router, arp, arpfwd) exactly as
#                             `tern virt bench --timed` runs it: its program and scenario
#                             command file as a bare switch vs p4/virt/scenarios/functions
#                             (four devices, virtual ports renumbered); fn_native32:F / fn32:F
#                             in batches of 32.
#   slice_next / slice_l2_next / fn_next:F - the sliced side one packet per call through
#                             VirtSwitch::process_next (the previous call's frame given back
#                             in the call; NEXT=1) instead of process_batch + recycle_outputs.
#   slice_each / fn_each:F   - the same as one VirtSwitch::process_each session (EACH=1: one
#                             panic boundary for the whole loop).
#   chain_each / ex1b_each / ex1c_each (and _next) - the chains one packet per call (a
#                             process_each session; process_next) against pair / ex1b_native /
#                             ex1c_native (BATCH=1: the bare switches one packet per call, each
#                             hop's frame passed on, as `tern virt bench --timed` runs them).
#   fn32_burst:F / fn_native32_burst:F / ex1b32_burst / ex1b_native32_burst (and ex1c) - the
#                             batches through the burst API on both sides (BURST=1):
#                             Switch::process_burst natively, VirtSwitch::process_burst sliced.
# Only the packet loop is counted (--toggle-collect on the example's `measured`): set-up and
# compilation, whose counts move between runs with hash seeds, stay out.
# Usage (repository root): bench/virt_callgrind.sh
#   X   the slice_cost binary (default target/release/examples/slice_cost, build it with
#       `cargo build --release -p tern-virt --example slice_cost`); it compiles the programs
#       itself (the same work in both runs of a mode, so it cancels out).
set -euo pipefail
cd "$(dirname "$0")/.."
X=${X:-target/release/examples/slice_cost}
N1=${N1:-1024}
N2=${N2:-11264}
FNS="fn_native32:l2 fn32:l2 fn_native:l2 fn:l2 fn_native32:fw fn32:fw fn_native:fw fn:fw"
FNS="$FNS fn_native32:router fn32:router fn_native:router fn:router fn_native32:arp fn32:arp"
FNS="$FNS fn_native:arp fn:arp"
MODES=${MODES:-"native slice native32 slice32 pair chain pair32 chain32 native_l2 slice_l2 ex1b_native32 ex1b32 ex1c_native32 ex1c32 $FNS"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
for m in $MODES; do
    name=${m%%:*}
    func=
    [ "$name" != "$m" ] && func=${m#*:}
    next=
    case "$name" in *_next) next=1; name=${name%_next};; esac
    each=
    case "$name" in *_each) each=1; name=${name%_each};; esac
    burst=
    case "$name" in *_burst) burst=1; name=${name%_burst};; esac
    mode=${name%32}
    batch=1
    [ "$mode" != "$name" ] && batch=32
    for n in $N1 $N2; do
        env ${func:+FUNC=$func} ${next:+NEXT=1} ${each:+EACH=1} ${burst:+BURST=1} BATCH=$batch valgrind --tool=callgrind \
            --toggle-collect=slice_cost::measured --callgrind-out-file="$tmp/$m.$n.cg" \
            "$X" "$mode" "$n" p4/tutorials/basic.p4 p4/virt/firewall.p4 p4/virt/l2_switch.p4 >/dev/null 2>&1
    done
    a=$(ir "$tmp/$m.$N1.cg")
    b=$(ir "$tmp/$m.$N2.cg")
    printf '%-20s %8d instructions/packet\n' "$m" $(( (b - a) / (N2 - N1) ))
done
