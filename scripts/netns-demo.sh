#!/usr/bin/env bash
# tern as a router between two network namespaces: h1 (10.0.0.10) -- [tern: simple_router] --
# h2 (10.0.1.10), with BMv2's simple_router.json and its commands.txt, static neighbours so no
# ARP is needed. Pings h2 from h1, then leaves the switch running until Ctrl-C (everything is
# removed on exit). Needs root and `ip`.
# Usage: scripts/netns-demo.sh [path to tern]   (default: target/debug/tern)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TERN=${1:-$ROOT/target/debug/tern}
FIX=$ROOT/../shared/fixtures/bmv2/targets/simple_router
[[ -x $TERN ]] || { echo "no tern binary at $TERN (cargo build -p tern)" >&2; exit 1; }
cleanup() {
  [[ -n ${SW:-} ]] && kill -TERM "$SW" 2>/dev/null && wait "$SW" 2>/dev/null || true
  for i in 1 2; do ip link del demo-p$i 2>/dev/null || true; ip netns del demo-h$i 2>/dev/null || true; done
}
trap cleanup EXIT
cleanup
host() { # NS ROOT_IF MAC ADDR GW GW_MAC
  ip netns add "$1"
  ip link add "$2" type veth peer name "$2x"
  ip link set "$2x" netns "$1"
  ip netns exec "$1" ip link set "$2x" name eth0
  ip netns exec "$1" ip link set eth0 address "$3"
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
  ip netns exec "$1" ip addr add "$4/24" dev eth0
  ip netns exec "$1" ip link set lo up
  ip netns exec "$1" ip link set eth0 up
  ip netns exec "$1" ip route add default via "$5" dev eth0
  ip netns exec "$1" ip neigh replace "$5" lladdr "$6" dev eth0 nud permanent
  echo 1 > "/proc/sys/net/ipv6/conf/$2/disable_ipv6"
  ip link set "$2" up
}
host demo-h1 demo-p1 00:04:00:00:00:00 10.0.0.10 10.0.0.1 00:aa:bb:00:00:00
host demo-h2 demo-p2 00:04:00:00:00:01 10.0.1.10 10.0.1.1 00:aa:bb:00:00:01
"$TERN" run -i 1@demo-p1 -i 2@demo-p2 --commands "$FIX/commands.txt" "$FIX/simple_router.json" &
SW=$!
sleep 1
ip netns exec demo-h1 ping -c 3 -W 1 10.0.1.10
echo "switch running: try 'ip netns exec demo-h1 ping 10.0.1.10'; Ctrl-C to stop"
wait "$SW" || true
SW=
