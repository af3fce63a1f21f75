#!/usr/bin/env bash
# Packets/s through `tern run` on veth (a zero-work program: every frame to port 2) versus the
# zero-work AF_PACKET forwarder example (same I/O layer, no switch), measured in the same run.
# Topology: netns tb-gen (generator) -> veth -> [switch in the root netns] -> veth -> netns
# tb-sink, whose kernel counts and drops the frames (destination MAC not local).
# Needs root, `ip`, and release builds:
#   cargo build --release -p tern --bin tern && cargo build --release -p tern-ports --examples
# Usage: scripts/live-ports-bench.sh [ROUNDS] [SECONDS]
# NO_BYPASS=1 adds a third contender per round, `tern run --no-qdisc-bypass` (transmit through
# the qdisc layer); TERN_ARGS="..." adds options to every `tern run` (e.g. --rx-ring blocks);
# TERN_IO=xdp runs both the forwarder and `tern run` on AF_XDP (`--io xdp`).
# The CPU time per frame (switch user + system time over the frames that reached the sink) is
# the figure to compare on a shared machine; the rates need a quiet one.
set -euo pipefail
ROUNDS=${1:-3}
SECS=${2:-7}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release
TERN=$TARGET/tern
FWD=$TARGET/examples/afpacket_fwd
GEN=$TARGET/examples/afpacket_gen
LOOPBACK=$ROOT/../shared/fixtures/bmv2/targets/simple_switch_grpc/tests/testdata/loopback.json
for b in "$TERN" "$FWD" "$GEN"; do [[ -x $b ]] || { echo "missing $b (build it first)" >&2; exit 1; }; done
WORK=$(mktemp -d)
cleanup() {
  [[ -n ${SW:-} ]] && kill "$SW" 2>/dev/null || true
  ip link del tbg0 2>/dev/null || true
  ip link del tbs0 2>/dev/null || true
  ip netns del tb-gen 2>/dev/null || true
  ip netns del tb-sink 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
cleanup; WORK=$(mktemp -d)

# loopback.json, but every frame goes out of port 2.
python3 - "$LOOPBACK" "$WORK/to2.json" <<'PY'
import sys
s = open(sys.argv[1]).read()
old = '"type" : "field",\n              "value" : ["standard_metadata", "ingress_port"]'
assert s.count(old) == 1, "fixture layout changed"
open(sys.argv[2], "w").write(s.replace(old, '"type" : "hexstr", "value" : "0x2"'))
PY

for side in gen sink; do
  ns=tb-$side; r=tb${side:0:1}0; h=tb${side:0:1}1
  ip netns add $ns
  ip link add $r type veth peer name $h
  ip link set $h netns $ns
  ip netns exec $ns ip link set $h up
  ip netns exec $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  echo 1 > /proc/sys/net/ipv6/conf/$r/disable_ipv6
  ip link set $r up
done
sink_rx() { ip netns exec tb-sink cat /sys/class/net/tbs1/statistics/rx_packets; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure() { # $1 = label; the switch is already running as $SW
  sleep 1
  local s0; s0=$(sink_rx); local c0; c0=$(cpu_ticks "$SW")
  ip netns exec tb-gen taskset -c 0 "$GEN" tbg1 "$SECS" 2>"$WORK/gen.err" &
  local g=$!
  sleep 1.5; local a; a=$(sink_rx); local t0; t0=$(date +%s.%N)
  sleep $((SECS - 3)); local b; b=$(sink_rx); local t1; t1=$(date +%s.%N)
  wait $g
  sleep 0.5
  local s1; s1=$(sink_rx); local c1; c1=$(cpu_ticks "$SW"); local hz; hz=$(getconf CLK_TCK)
  kill -TERM "$SW"; wait "$SW" 2>/dev/null || true; SW=
  # Rate at the sink over the steady window; switch CPU time per forwarded frame over the run
  # (less sensitive to other load on the machine than the rate).
  python3 -c "print('%-12s %.3f Mpps   %.2f us CPU/frame' % ('$1', ($b - $a) / ($t1 - $t0) / 1e6, ($c1 - $c0) / $hz * 1e6 / max(1, $s1 - $s0)))"
  sed 's/^/    /' "$WORK/gen.err"; sed 's/^/    /' "$WORK/sw.err" | grep -v '^    $' | tail -2
}

for r in $(seq "$ROUNDS"); do
  taskset -c 1 "$FWD" tbg0 tbs0 2>"$WORK/sw.err" & SW=$!
  measure "forwarder"
  # shellcheck disable=SC2086 # TERN_ARGS is a list of options
  taskset -c 1 "$TERN" run -i 1@tbg0 -i 2@tbs0 --io "${TERN_IO:-afpacket}" ${TERN_ARGS:-} \
    "$WORK/to2.json" 2>"$WORK/sw.err" & SW=$!
  measure "tern run"
  if [[ -n ${NO_BYPASS:-} ]]; then
    # shellcheck disable=SC2086
    taskset -c 1 "$TERN" run -i 1@tbg0 -i 2@tbs0 --no-qdisc-bypass ${TERN_ARGS:-} "$WORK/to2.json" \
      2>"$WORK/sw.err" & SW=$!
    measure "no bypass"
  fi
done
