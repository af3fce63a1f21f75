#!/usr/bin/env bash
# The p4lang tutorials' triangle, run on tern: tests/tutorial/run.sh path/to/tern
# Hosts h1..h3 each in a network namespace, three `tern run --no-p4 --grpc-addr` switches in a
# fourth one, wired as in the tutorials (hN on port 1 of sN; s1-p2/s2-p2, s1-p3/s3-p2,
# s2-p3/s3-p3). Before the controller runs, h1 cannot reach h2 (no program); then
# controller.py pushes basic.p4 (compiled by tern) and the routes over P4Runtime, and every
# host pings every other one. Needs root, ip and ping; prints "skipping: ..." and exits 0 otherwise.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 TERN_BINARY" >&2
    exit 2
fi
TERN_BIN=$(realpath "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "skipping: the tutorial run needs root (network namespaces, raw sockets)"
    exit 0
fi
for tool in ip ping; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "skipping: the tutorial run needs $tool"
        exit 0
    fi
done

. "$ROOT/tests/venv-p4rt.sh"   # sets VENV

P="tri$$"
SW="$P-sw"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    for ns in "$SW" "$P-h1" "$P-h2" "$P-h3"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' INT TERM HUP   # so that an interrupted run still cleans up

if ! ip netns add "$SW" 2>/dev/null; then
    echo "skipping: cannot create a network namespace (ip netns add)"
    exit 0
fi
ip -n "$SW" link set lo up
sysctl_off_v6() { ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; }
sysctl_off_v6 "$SW"

# Hosts: hN in namespace $P-hN, eth0 <-> sN-eth1, default route through the switch's MAC.
for n in 1 2 3; do
    ns="$P-h$n"
    ip netns add "$ns"
    sysctl_off_v6 "$ns"
    ip -n "$SW" link add "s$n-eth1" type veth peer name eth0 netns "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 address "08:00:00:00:0$n:${n}${n}"
    ip -n "$ns" addr add "10.0.$n.$n/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "10.0.$n.10" dev eth0
    ip -n "$ns" neigh add "10.0.$n.10" lladdr "08:00:00:00:0$n:00" dev eth0
done
# Switch-to-switch links.
for link in "1-2 2-2" "1-3 3-2" "2-3 3-3"; do
    set -- $link
    ip -n "$SW" link add "s${1%-*}-eth${1#*-}" type veth peer name "s${2%-*}-eth${2#*-}"
done
for n in 1 2 3; do
    for p in 1 2 3; do
        ip -n "$SW" link set "s$n-eth$p" up
    done
done

for prog in basic p4runtime; do
    "$TERN_BIN" compile "$ROOT/p4/tutorials/$prog.p4" -o "$WORK/$prog.json" \
        --p4runtime-files "$WORK/$prog.p4info.txt"
done

ADDRS=()
for n in 1 2 3; do
    ip netns exec "$SW" "$TERN_BIN" run --no-p4 -i "1@s$n-eth1" -i "2@s$n-eth2" -i "3@s$n-eth3" \
        --device-id $((n - 1)) --grpc-addr "127.0.0.1:5005$n" --thrift-port "909$n" \
        >"$WORK/s$n.log" 2>&1 &
    PIDS+=($!)
    ADDRS+=("127.0.0.1:5005$n")
done

passed=0
failed=0
check() {  # check NAME COMMAND...: count and print one result
    local name=$1
    shift
    if "$@" >"$WORK/check.out" 2>&1; then
        passed=$((passed + 1))
        echo "PASS $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name"
        sed 's/^/    /' "$WORK/check.out"
    fi
}
ping_ok() { ip netns exec "$P-h$1" ping -c 1 -W 2 "10.0.$2.$2"; }
ping_fails() { ! ip netns exec "$P-h$1" ping -c 1 -W 1 "10.0.$2.$2"; }

check "h1 cannot reach h2 before the controller runs" ping_fails 1 2
controller() {  # controller MODE [N] PROGRAM
    local mode=$1 prog=${!#}
    local extra=("${@:2:$#-2}")
    timeout 60 ip netns exec "$SW" "$VENV/bin/python" "$HERE/controller.py" "$mode" "${extra[@]}" \
        "$WORK/$prog.p4info.txt" "$WORK/$prog.json" "${ADDRS[@]}"
}

# basic.p4: IPv4 routes on every switch, every host reaches every other one.
check "controller: basic.p4 and routes on s1, s2, s3" controller routes basic
for a in 1 2 3; do
    for b in 1 2 3; do
        [ "$a" = "$b" ] && continue
        check "h$a pings h$b" ping_ok "$a" "$b"
    done
done

# p4runtime.p4 (the tutorials' p4runtime exercise): tunnels between h1 and h2 only, and the
# controller reads the tunnel counters back.
check "controller: p4runtime.p4 and tunnels h1 <-> h2" controller tunnels p4runtime
check "h1 pings h2 three times through the tunnels" \
    ip netns exec "$P-h1" ping -c 3 -i 0.2 -W 2 10.0.2.2
check "h1 cannot reach h3 (no tunnel)" ping_fails 1 3
check "controller: tunnel counters count the pings" controller counters 3 p4runtime
for n in 1 2 3; do
    if ! kill -0 "${PIDS[$((n - 1))]}" 2>/dev/null; then
        failed=$((failed + 1))
        echo "FAIL s$n exited:"
        cat "$WORK/s$n.log"
    fi
done
echo "tutorial: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
