#!/usr/bin/env bash
# Ping round trip through a live tern switch: two hosts in network namespaces, each joined by a
# veth pair to `tern run` (BMv2's simple_router, configured through Thrift) in a third
# namespace; the same topology as crates/tern/tests/netns.rs. Needs root, ip, ping.
#
#   bench/live_latency.sh [TERN] [COUNT] [-- extra `tern run` options, e.g. --rx-ring blocks]
#
# Prints the ping summary and the median RTT of COUNT (default 500) echo requests sent 5 ms
# apart (a low packet rate: one request in flight at a time).
set -euo pipefail
TERN=${1:-target/release/tern}
COUNT=${2:-500}
shift $(( $# < 2 ? $# : 2 ))
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
FIX=$(cd "$(dirname "$0")/../.." && pwd)/shared/fixtures/bmv2/targets/simple_router
id=$$
SW=tlat-sw-$id H1=tlat-h1-$id H2=tlat-h2-$id
PID=
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    for n in $SW $H1 $H2; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
for n in $SW $H1 $H2; do ip netns add "$n"; ip -n "$n" link set lo up; done
host() { # ns port mac addr gw gwmac
    ip link add "p$2-$id" type veth peer name "e$2-$id"
    ip link set "p$2-$id" netns $SW name "p$2"
    ip link set "e$2-$id" netns "$1" name eth0
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip netns exec $SW sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip -n "$1" link set eth0 address "$3"
    ip -n "$1" addr add "$4/24" dev eth0
    ip -n "$1" link set eth0 up
    ip -n "$1" route add default via "$5" dev eth0
    ip -n "$1" neigh replace "$5" lladdr "$6" dev eth0 nud permanent
    ip -n $SW link set "p$2" up
}
host $H1 1 00:04:00:00:00:00 10.0.0.10 10.0.0.1 00:aa:bb:00:00:00
host $H2 2 00:04:00:00:00:01 10.0.1.10 10.0.1.1 00:aa:bb:00:00:01
LOG=$(mktemp)
ip netns exec $SW "$TERN" run -i 1@p1 -i 2@p2 --thrift-port 9090 "${EXTRA[@]}" \
    "$FIX/simple_router.json" 2>"$LOG" &
PID=$!
for _ in $(seq 100); do grep -q "switching on" "$LOG" && break; sleep 0.1; done
ip netns exec $SW "$TERN" cli --thrift-port 9090 --commands "$FIX/commands.txt" >/dev/null
ip netns exec $H1 ping -q -c 20 -i 0.01 10.0.1.10 >/dev/null # warm up
OUT=$(ip netns exec $H1 ping -c "$COUNT" -i 0.005 10.0.1.10)
echo "$OUT" | tail -2
echo "$OUT" | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -n |
    awk '{v[NR]=$1} END {printf "median rtt %.3f ms, p90 %.3f ms (%d replies)\n", v[int((NR+1)/2)], v[int(NR*0.9)], NR}'
