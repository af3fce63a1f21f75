#!/usr/bin/env bash
# HyPer4's scenarios (../shared/reference/virtualization.md §1.6) on one tern with many devices:
# hosts in network namespaces, joined by veth pairs to `tern virt run --live` running in a
# switch namespace, the config of p4/virt/scenarios/SCENARIO/virt.json; then every expected
# behaviour is checked and printed as PASS/FAIL lines.
#
#   ex1  snapshots and composition: s1 - s2 - s3, phases A (ARP proxy | L2 | ARP proxy),
#        B (L2 | firewall | L2), C (L2 | ARP proxy -> firewall -> router | L2), all devices
#        pre-loaded, phases switched live (with ping floods running: 0 loss for unaffected flows)
#   ex2  slicing and composition: ports 1-2 an L2 switch, ports 3-4 a firewall -> router chain
#   ex3  virtual networking: eight devices (firewalls f1, f2, routers r1-r4, internal L2
#        switches l2_s1, l2_s2), four hosts in four networks, 14 links
#
# Usage: scripts/virt/scenario.sh ex1|ex2|ex3 [path to tern]   (default: target/debug/tern)
# VIRT_WORKERS=N runs the switch with `--workers N` (devices on N worker threads; the
# operator's commands and the checks are the same).
# Needs root, `ip`, `ping` and python3. Exit status: 0 all checks passed, 1 a check failed,
# 77 skipped (not root or a tool missing). Everything it creates (namespaces, veths, processes,
# the temporary folder) is removed on exit, also on failure or Ctrl-C.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/virt/common.sh
. "$ROOT/scripts/virt/common.sh"
SCEN=${1:-}
TERN=${2:-$ROOT/target/debug/tern}
case $SCEN in
ex1 | ex2 | ex3) ;;
*)
  echo "usage: $0 ex1|ex2|ex3 [tern binary]" >&2
  exit 2
  ;;
esac
CFG=$ROOT/p4/virt/scenarios/$SCEN/virt.json
PROBE=$ROOT/scripts/virt/probe.py
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: $SCEN needs root (network namespaces)"
  exit 77
fi
for t in ip ping python3; do
  command -v "$t" >/dev/null || {
    echo "SKIP: $SCEN needs $t"
    exit 77
  }
done
[[ -x $TERN ]] || {
  echo "no tern binary at $TERN (cargo build -p tern)" >&2
  exit 2
}

P=tv$$ # prefix of every namespace and interface of this run (unique per run)
SWNS=$P-sw
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tern-virt-$SCEN-XXXXXX")
ADMIN=$TMP/admin.sock
SW=
HELPERS=()
FAILS=0
CHECKS=0

cleanup() {
  virt_teardown
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass() {
  CHECKS=$((CHECKS + 1))
  echo "PASS: $*"
}
fail() {
  CHECKS=$((CHECKS + 1))
  FAILS=$((FAILS + 1))
  echo "FAIL: $*"
}
check() { # DESCRIPTION COMMAND...: pass when the command succeeds
  local what=$1
  shift
  if "$@" >"$TMP/out" 2>&1; then pass "$what"; else
    fail "$what"
    sed 's/^/    /' "$TMP/out"
  fi
}
in_ns() { # HOST COMMAND...
  local h=$1
  shift
  ip netns exec "$P-$h" "$@"
}

ip netns add "$SWNS"
ip netns exec "$SWNS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip -n "$SWNS" link set lo up

host() { # N MAC ADDR/PLEN [GATEWAY]: host hN on switch port N (interface ${P}pN)
  local ns=$P-h$1
  attach_host "$ns" "$SWNS" "${P}p$1" "$2" "$3"
  # Small frames only: no TSO/GSO super-frames towards the switch.
  ip netns exec "$ns" ethtool -K eth0 tso off gso off gro off >/dev/null 2>&1 || true
  if [[ -n ${4:-} ]]; then ip -n "$ns" route add default via "$4" dev eth0; fi
}

start_switch() { # NPORTS
  local args=() i
  for i in $(seq "$1"); do args+=(-i "$i@${P}p$i"); done
  if [[ -n ${VIRT_WORKERS:-} ]]; then args+=(--workers "$VIRT_WORKERS"); fi
  ip netns exec "$SWNS" "$TERN" virt run "$CFG" --live --admin "$ADMIN" "${args[@]}" \
    >"$TMP/tern.log" 2>&1 &
  SW=$!
  for i in $(seq 600); do
    grep -q "switching on" "$TMP/tern.log" 2>/dev/null && break
    if ! kill -0 "$SW" 2>/dev/null; then
      echo "tern virt run exited:" >&2
      cat "$TMP/tern.log" >&2
      SW=
      exit 1
    fi
    sleep 0.1
  done
  grep -q "switching on" "$TMP/tern.log" || {
    echo "tern virt run did not start in 60 s:" >&2
    cat "$TMP/tern.log" >&2
    exit 1
  }
  echo "switch up: $(grep -c '' "$TMP/tern.log") lines of start-up log; devices $(ctl devices)"
}

ctl() { "$TERN" virt ctl "$ADMIN" "$@"; }

snapshot() { # NAME: switch live, print the switch time
  local a
  a=$(ctl snapshot "$1") || {
    fail "activate snapshot $1: $a"
    return
  }
  pass "snapshot $1 activated live: ${a#ok }"
}

dev_in() { # DEVICE: packets that entered it so far
  ctl stats | awk -v d="device $1:" 'index($0, d) == 1 { sub(",", "", $4); print $4 }'
}

pings() { # FROM ADDR [COUNT]: every echo answered
  in_ns "h$1" ping -c "${3:-3}" -i 0.2 -W 5 -q "$2" >"$TMP/ping" 2>&1
  grep -q " 0% packet loss" "$TMP/ping"
}
no_ping() { # FROM ADDR: nothing answered
  ! in_ns "h$1" ping -c 2 -i 0.2 -W 2 -q "$2" >/dev/null 2>&1
}
routed() { # FROM ADDR [TTL]: answered with TTL 63 (one router on the way) or TTL
  local o
  o=$(in_ns "h$1" ping -c 3 -i 0.2 -W 5 "$2" 2>&1)
  grep -q "ttl=${3:-63}" <<<"$o" || {
    echo "$o"
    return 1
  }
}
serve() { # HOST PROTO PORT: an echo server for 90 s, waited for until it listens
  local ready=$TMP/ready-h$1-$2-$3 i
  rm -f "$ready"
  in_ns "h$1" python3 "$PROBE" serve "$2" "$3" 90 "$ready" &
  HELPERS+=($!)
  for i in $(seq 200); do
    [[ -e $ready ]] && return 0
    sleep 0.1
  done
  fail "echo server $2/$3 on h$1 did not start"
}
probe() { # FROM PROTO ADDR PORT EXPECTED(pass|blocked)
  local got
  got=$(in_ns "h$1" python3 "$PROBE" try "$2" "$3" "$4")
  [[ $got == "$5" ]] || {
    echo "got '$got'"
    return 1
  }
}
neigh_mac() { # HOST ADDR: the MAC address the host resolved ADDR to
  in_ns "h$1" ip neigh show "$2" dev eth0 | awk '{for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1)}'
}
is_mac() { # HOST ADDR MAC
  local m
  m=$(neigh_mac "$1" "$2")
  [[ $m == "$3" ]] || {
    echo "h$1 resolved $2 to '$m'"
    return 1
  }
}
flood_loss_free() { # OUTPUT_FILE: a finished ping flood lost nothing
  grep -E "packets transmitted" "$1"
  grep -q " 0% packet loss" "$1"
}
delta_is() { # WHAT EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then pass "$1 ($3)"; else fail "$1: expected $2, got $3"; fi
}

MAC1=00:00:00:00:00:01 MAC2=00:00:00:00:00:02 MAC3=00:00:00:00:00:03 MAC4=00:00:00:00:00:04
RMAC=00:00:00:00:0a:0a

scenario_ex1() {
  host 1 $MAC1 10.0.0.1/24
  host 2 $MAC2 10.0.0.2/24
  host 3 $MAC3 10.0.0.3/24
  host 4 $MAC4 10.0.0.4/24
  start_switch 4
  echo "== phase A: s1 ARP proxy (+ L2 behind it) | s2 L2 switch | s3 ARP proxy (+ L2)"
  local s2 l2 a b
  s2=$(dev_in 21)
  l2=$(dev_in 12)
  check "A: h1 -> h2 ping" pings 1 10.0.0.2
  a=$(dev_in 21)
  b=$(dev_in 12)
  delta_is "A: h1 <-> h2: nothing reached s2 (ARP answered on s1)" 0 $((a - s2))
  delta_is "A: h1 <-> h2: s1's L2 switch saw only the 6 ICMP packets, no ARP" 6 $((b - l2))
  check "A: h1 resolved h2 through s1's proxy" is_mac 1 10.0.0.2 $MAC2
  s2=$(dev_in 21)
  local pair n=0
  for pair in "1 10.0.0.3" "1 10.0.0.4" "2 10.0.0.3" "2 10.0.0.4"; do
    # shellcheck disable=SC2086
    check "A: h${pair% *} -> ${pair#* } ping across s2" pings $pair
    n=$((n + 6))
  done
  check "A: h2 -> h1 ping" pings 2 10.0.0.1
  check "A: h3 -> h4 ping (on s3)" pings 3 10.0.0.4
  a=$(dev_in 21)
  delta_is "A: s2 saw exactly the ICMP packets across it (ARP answered at the edges)" $n $((a - s2))

  echo "== live switches A -> B -> C under ping floods (h1 -> h2 through A, B, C; h1 -> h3 through A, B)"
  in_ns h1 ping -i 0.005 -c 1000 -w 60 -q 10.0.0.2 >"$TMP/flood12" 2>&1 &
  local f12=$!
  HELPERS+=("$f12")
  in_ns h1 ping -i 0.005 -c 400 -w 60 -q 10.0.0.3 >"$TMP/flood13" 2>&1 &
  local f13=$!
  HELPERS+=("$f13")
  sleep 0.7
  snapshot B
  wait "$f13"
  check "flood h1 -> h3 across A -> B: 0 % loss" flood_loss_free "$TMP/flood13"
  snapshot C
  wait "$f12"
  check "flood h1 -> h2 across A -> B -> C: 0 % loss" flood_loss_free "$TMP/flood12"
  cat "$TMP/flood12" "$TMP/flood13" | grep -E "transmitted|rtt" | sed 's/^/    /'

  echo "== phase B: s1 L2 | s2 firewall | s3 L2"
  snapshot B
  for pair in "1 10.0.0.2" "1 10.0.0.3" "1 10.0.0.4" "2 10.0.0.3" "2 10.0.0.4" "3 10.0.0.4"; do
    # shellcheck disable=SC2086
    check "B: h${pair% *} -> ${pair#* } ping" pings $pair
  done
  serve 3 tcp 5001
  serve 3 tcp 4000
  serve 3 udp 5000
  serve 3 udp 5001
  serve 2 tcp 4000
  serve 2 udp 5000
  check "B: h1 -> h3 TCP 5001 passes the firewall" probe 1 tcp 10.0.0.3 5001 pass
  check "B: h1 -> h3 TCP 4000 blocked (server's source port 4000)" probe 1 tcp 10.0.0.3 4000 blocked
  check "B: h1 -> h3 UDP 5000 blocked" probe 1 udp 10.0.0.3 5000 blocked
  check "B: h1 -> h3 UDP 5001 passes" probe 1 udp 10.0.0.3 5001 pass
  check "B: h1 -> h2 TCP 4000 passes (stays on s1, never meets the firewall)" probe 1 tcp 10.0.0.2 4000 pass
  check "B: h1 -> h2 UDP 5000 passes (stays on s1)" probe 1 udp 10.0.0.2 5000 pass

  echo "== phase C: s1 L2 | s2 ARP proxy -> firewall -> router | s3 L2; h3, h4 move to 10.0.1.0/24"
  snapshot C
  for h in 3 4; do
    ip -n "$P-h$h" addr flush dev eth0
    ip -n "$P-h$h" addr add "10.0.1.$h/24" dev eth0
    ip -n "$P-h$h" route add default via 10.0.1.1 dev eth0
    ip -n "$P-h$h" neigh flush dev eth0
  done
  for h in 1 2; do
    ip -n "$P-h$h" route add 10.0.1.0/24 via 10.0.0.5 dev eth0
    ip -n "$P-h$h" neigh flush dev eth0
  done
  for pair in "1 10.0.1.3" "1 10.0.1.4" "2 10.0.1.3" "2 10.0.1.4"; do
    # shellcheck disable=SC2086
    check "C: h${pair% *} -> ${pair#* } routed ping" pings $pair
    # shellcheck disable=SC2086
    check "C: h${pair% *} -> ${pair#* } answered with TTL 63 (routed once)" routed $pair
  done
  check "C: h1 -> h2 ping (s1 only)" pings 1 10.0.0.2
  check "C: h3 -> h4 ping (s3 only)" pings 3 10.0.1.4
  check "C: h1's gateway 10.0.0.5 answered by s2's ARP proxy (router MAC)" is_mac 1 10.0.0.5 $RMAC
  check "C: h3's gateway 10.0.1.1 answered by s2's ARP proxy (router MAC)" is_mac 3 10.0.1.1 $RMAC
  serve 4 tcp 5001
  serve 4 tcp 4000
  serve 4 udp 5000
  check "C: h1 -> h4 TCP 5001 passes (routed)" probe 1 tcp 10.0.1.4 5001 pass
  check "C: h1 -> h4 TCP 4000 blocked by s2's firewall" probe 1 tcp 10.0.1.4 4000 blocked
  check "C: h1 -> h4 UDP 5000 blocked by s2's firewall" probe 1 udp 10.0.1.4 5000 blocked
}

scenario_ex2() {
  host 1 $MAC1 10.0.0.1/24
  host 2 $MAC2 10.0.0.2/24
  host 3 $MAC3 10.0.1.3/24 10.0.1.1
  host 4 $MAC4 10.0.2.4/24 10.0.2.1
  ip -n "$P-h3" neigh replace 10.0.1.1 lladdr $RMAC dev eth0 nud permanent
  ip -n "$P-h4" neigh replace 10.0.2.1 lladdr $RMAC dev eth0 nud permanent
  # Static neighbours in slice A too: no ARP upkeep traffic blurs the per-device counts below.
  ip -n "$P-h1" neigh replace 10.0.0.2 lladdr $MAC2 dev eth0 nud permanent
  ip -n "$P-h2" neigh replace 10.0.0.1 lladdr $MAC1 dev eth0 nud permanent
  start_switch 4
  echo "== slice A (ports 1-2): L2 switch; slice B (ports 3-4): firewall -> router"
  check "h1 -> h2 ping (slice A)" pings 1 10.0.0.2
  check "h2 -> h1 ping (slice A)" pings 2 10.0.0.1
  check "h3 -> h4 ping (slice B)" pings 3 10.0.2.4
  check "h4 -> h3 ping (slice B)" pings 4 10.0.1.3
  check "h3 -> h4 answered with TTL 63 (routed once)" routed 3 10.0.2.4
  local a0 b0 c0 a1 b1 c1
  # Nothing crosses slices: h1 sends straight to h3's address and MAC; h3 to h1's.
  ip -n "$P-h1" route add 10.0.1.0/24 dev eth0
  ip -n "$P-h1" neigh replace 10.0.1.3 lladdr $MAC3 dev eth0 nud permanent
  a0=$(dev_in 1) b0=$(dev_in 2) c0=$(dev_in 3)
  check "h1 -> h3 (other slice): no answer" no_ping 1 10.0.1.3
  a1=$(dev_in 1) b1=$(dev_in 2) c1=$(dev_in 3)
  delta_is "h1 -> h3: slice B's firewall saw none of it" 0 $((b1 - b0))
  delta_is "h1 -> h3: slice B's router saw none of it" 0 $((c1 - c0))
  delta_is "h1 -> h3: slice A's L2 switch got the 2 echo requests" 2 $((a1 - a0))
  a0=$a1 b0=$b1
  check "h3 -> h1 (other slice): no answer" no_ping 3 10.0.0.1
  a1=$(dev_in 1) b1=$(dev_in 2)
  delta_is "h3 -> h1: slice A's L2 switch saw none of it" 0 $((a1 - a0))
  delta_is "h3 -> h1: slice B's firewall got the 2 echo requests" 2 $((b1 - b0))
  serve 4 tcp 5001
  serve 4 tcp 4000
  serve 4 udp 5000
  serve 4 udp 5001
  serve 2 tcp 4000
  serve 2 udp 5000
  check "h3 -> h4 TCP 5001 passes firewall and router" probe 3 tcp 10.0.2.4 5001 pass
  check "h3 -> h4 TCP 4000 blocked (server's source port 4000)" probe 3 tcp 10.0.2.4 4000 blocked
  check "h3 -> h4 UDP 5000 blocked" probe 3 udp 10.0.2.4 5000 blocked
  check "h3 -> h4 UDP 5001 passes" probe 3 udp 10.0.2.4 5001 pass
  check "h1 -> h2 TCP 4000 passes (slice A has no firewall)" probe 1 tcp 10.0.0.2 4000 pass
  check "h1 -> h2 UDP 5000 passes (slice A)" probe 1 udp 10.0.0.2 5000 pass
}

scenario_ex3() {
  local k
  for k in 1 2 3 4; do
    host $k "00:00:00:00:00:0$k" "10.$k.0.2/24" "10.$k.0.1"
    ip -n "$P-h$k" neigh replace "10.$k.0.1" lladdr "00:00:00:00:0$k:01" dev eth0 nud permanent
  done
  start_switch 4
  echo "== h1 -> f1 -> r1, h2 -> f2 -> r2, h3 -> r3, h4 -> r4; routers joined by l2_s1 - l2_s2"
  local a b pair
  for pair in "1 10.2.0.2" "1 10.3.0.2" "1 10.4.0.2" "2 10.3.0.2" "2 10.4.0.2" "3 10.4.0.2"; do
    # shellcheck disable=SC2086
    check "h${pair% *} -> ${pair#* } ping" pings $pair
    # shellcheck disable=SC2086
    check "h${pair% *} -> ${pair#* } answered with TTL 62 (two routers)" routed $pair 62
  done
  # h3 <-> h4 crosses r3, l2_s2, r4 only: tenant 1 and 2's devices and l2_s1 see none of it.
  local before=() after=() d
  for d in 1 2 3 4 5; do before+=("$(dev_in $d)"); done
  check "h3 -> h4 ping (r3, l2_s2, r4 only)" pings 3 10.4.0.2
  for d in 1 2 3 4 5; do after+=("$(dev_in $d)"); done
  delta_is "h3 <-> h4: devices f1, r1, l2_s1, f2, r2 saw none of it" "0 0 0 0 0" \
    "$((after[0] - before[0])) $((after[1] - before[1])) $((after[2] - before[2])) $((after[3] - before[3])) $((after[4] - before[4]))"
  serve 1 tcp 5001
  serve 1 tcp 4000
  serve 1 udp 5000
  serve 4 tcp 4000
  serve 4 udp 5000
  check "h3 -> h1 TCP 5001 passes f1" probe 3 tcp 10.1.0.2 5001 pass
  check "h3 -> h1 TCP 4000 blocked by f1 (server's source port 4000)" probe 3 tcp 10.1.0.2 4000 blocked
  check "h3 -> h1 UDP 5000 blocked by f1" probe 3 udp 10.1.0.2 5000 blocked
  check "h3 -> h4 TCP 4000 passes (no firewall on that path)" probe 3 tcp 10.4.0.2 4000 pass
  check "h3 -> h4 UDP 5000 passes (no firewall on that path)" probe 3 udp 10.4.0.2 5000 pass
  check "h2 -> h4 UDP 5000 blocked by f2" probe 2 udp 10.4.0.2 5000 blocked
}

"scenario_$SCEN"
echo "== switch counters"
ctl stats | sed 's/^/    /'
if ((FAILS == 0)); then
  echo "$SCEN: all $CHECKS checks passed"
else
  echo "$SCEN: $FAILS of $CHECKS checks FAILED (switch log: last lines)"
  tail -n 20 "$TMP/tern.log" | sed 's/^/    /'
  exit 1
fi
