#!/usr/bin/env bash
# PTF tests of `tern run --grpc-addr` on veth pairs: tests/ptf/run.sh path/to/tern [ptf test names]
# Needs root (network namespace, AF_PACKET); prints "skipping: ..." and exits 0 otherwise.
# Creates a namespace with veth pairs ptfN <-> swN (N = 1..3), runs tern in it on the swN ends
# with --no-p4 (each test pushes l3_cpu.p4 over P4Runtime), and PTF on the ptfN ends.
# Python packages (ptf, scapy, p4runtime-shell) live in the virtualenv .venv-p4rt.
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: $0 TERN_BINARY [ptf test names...]" >&2
    exit 2
fi
TERN_BIN=$(realpath "$1")
shift
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
    echo "skipping: the PTF tests need root (network namespaces, raw sockets)"
    exit 0
fi
if ! command -v ip >/dev/null 2>&1; then
    echo "skipping: the PTF tests need iproute2 (ip)"
    exit 0
fi

. "$ROOT/tests/venv-p4rt.sh"   # sets VENV

NS="ternptf$$"
WORK=$(mktemp -d)
TERN_PID=""
cleanup() {
    if [ -n "$TERN_PID" ]; then
        kill "$TERN_PID" 2>/dev/null || true
        wait "$TERN_PID" 2>/dev/null || true
    fi
    # Anything else still running in the namespace (a PTF process after a failure) goes too.
    ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' INT TERM HUP   # so that an interrupted run still cleans up

if ! ip netns add "$NS" 2>/dev/null; then
    echo "skipping: cannot create a network namespace (ip netns add)"
    exit 0
fi
in_ns() { ip netns exec "$NS" "$@"; }
in_ns ip link set lo up
# No IPv6: router solicitations and MLD reports would be unexpected packets on the ports.
in_ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
PTF_IFS=()
TERN_IFS=()
for n in 1 2 3; do
    in_ns ip link add "ptf$n" type veth peer name "sw$n"
    in_ns ip link set "ptf$n" up
    in_ns ip link set "sw$n" up
    PTF_IFS+=(--interface "$n@ptf$n")
    TERN_IFS+=(-i "$n@sw$n")
done

"$TERN_BIN" compile "$HERE/l3_cpu.p4" -o "$WORK/l3_cpu.json" --p4runtime-files "$WORK/l3_cpu.p4info.txt"

GRPC=127.0.0.1:9559
# Started with `ip netns exec` itself, not through the in_ns function: `$!` must be tern's pid
# (a function in the background is a subshell, and killing it would leave tern running).
ip netns exec "$NS" "$TERN_BIN" run --no-p4 "${TERN_IFS[@]}" --grpc-addr "$GRPC" --cpu-port 255 \
    --thrift-port 9090 >"$WORK/tern.log" 2>&1 &
TERN_PID=$!
for _ in $(seq 100); do
    if in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/9559" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$TERN_PID" 2>/dev/null; then
        echo "tern run did not start:"
        cat "$WORK/tern.log"
        exit 1
    fi
    sleep 0.1
done

set +e
in_ns "$VENV/bin/ptf" --test-dir "$HERE" "${PTF_IFS[@]}" --log-dir "$WORK/ptf-logs" \
    --test-params "grpc_addr='$GRPC';p4info='$WORK/l3_cpu.p4info.txt';json='$WORK/l3_cpu.json'" \
    "$@" 2>&1 | tee "$WORK/ptf.out"
status=${PIPESTATUS[0]}
set -e
if ! kill -0 "$TERN_PID" 2>/dev/null; then
    echo "tern run exited during the tests:"
    cat "$WORK/tern.log"
    status=1
fi
if [ "$status" -ne 0 ]; then
    echo "--- tern run log"
    tail -n 30 "$WORK/tern.log"
fi
# A closing line in the suite's format, from unittest's "Ran N tests" and "FAILED (...)".
set +o pipefail
ran=$(grep -Eo '^Ran [0-9]+ test' "$WORK/ptf.out" | awk '{print $2}' | tail -n 1)
bad=$(grep -E '^FAILED \(' "$WORK/ptf.out" | grep -Eo '(failures|errors)=[0-9]+' | cut -d= -f2 |
    awk '{s+=$1} END {print s+0}')
ran=${ran:-0}
if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
    bad=1
fi
passed=$((ran > bad ? ran - bad : 0))
echo "ptf: $passed passed, $bad failed"
exit "$status"
