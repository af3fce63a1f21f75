#!/usr/bin/env bash
# HyPer4's penalty table on tern, one command: writes bench/virt/ (or OUT).
#
#   scripts/virt/bench.sh [--timed | --veth] [--out DIR] [--tern PATH]
#
# Always: `tern virt bench` (counted per packet: tables, passes, hops; entries, rules, links;
# native vs sliced, the four functions and Example 1 B/C) -> DIR/virt_bench.{json,md}, and a
# plot DIR/virt_bench.png (matplotlib from .venv-plot, created if missing; skipped without
# network access to install it).
# With --timed (a release build on a quiet machine only; numbers from a shared machine are
# meaningless): packet rates in memory (`tern virt bench --timed`), and on veth pairs between
# network namespaces (root needed) per function: the total time of `ping -f -c 1000` (HyPer4's
# latency figure, RUNS runs, default 10) and, when iperf3 is installed, TCP bandwidth
# (iperf3 -t 10), native `tern run PROGRAM` vs the same program as a device of
# `tern virt run p4/virt/scenarios/functions/virt.json`, and Example 1 B / C h1 -> h3: three
# native `tern run` switches on veth (s2 hand-merged for C) vs one sliced tern -> DIR/veth.json.
# iperf3 is installed with apt-get when missing (as scripts/setup.sh installs the suite's
# packages). When BMv2 is installed (SIMPLE_SWITCH, default `simple_switch`, and
# SIMPLE_SWITCH_CLI, default `simple_switch_CLI`), the four functions also run on BMv2 (the
# program compiled by `tern compile`, the same command file) for a BMv2 column; "n/a" without.
# Latency on veth: besides the flood, every run also sends COUNT pings one at a time
# (`ping -i 0.001`, root) and keeps each echo's round-trip time: p50 and p99 per run
# (microseconds), native vs sliced, beside the flood times in veth.json and virt_bench.md.
# These ping / iperf3 rows are HyPer4's figures and swing tens of percent between runs; they
# cannot judge "within 5 %".
# --veth: the alternated-rounds veth bench instead, scripts/virt/veth-bench.sh (saturating
# rate, CPU per frame and payload-timestamped one-way delay, native vs sliced A B B A, with
# per-round ratios and a verdict against 5 %; as root, skipped with a message and exit 0
# otherwise; release builds; --tern passed on). Namespaces, veths and switch processes are
# removed on exit, also on failure.
# COUNT (default 1000), RUNS (default 10), IPERF_SECONDS (default 10) and PACKETS (in memory,
# default 200000) shrink the timed runs for a smoke test.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/virt/common.sh
. "$ROOT/scripts/virt/common.sh"
TIMED=0
VETH_ONLY=0
OUT=$ROOT/bench/virt
TERN=$ROOT/target/debug/tern
TERN_SET=0
while (($#)); do
  case $1 in
  --timed) TIMED=1 ;;
  --veth)
    VETH_ONLY=1
    ;;
  --out)
    OUT=$2
    shift
    ;;
  --tern)
    TERN=$2
    TERN_SET=1
    shift
    ;;
  *)
    echo "usage: $0 [--timed | --veth] [--out DIR] [--tern PATH]" >&2
    exit 2
    ;;
  esac
  shift
done
if ((VETH_ONLY)); then
  args=(--out "$OUT")
  ((TERN_SET)) && args+=(--tern "$TERN")
  exec "$ROOT/scripts/virt/veth-bench.sh" "${args[@]}"
fi
COUNT=${COUNT:-1000}
RUNS=${RUNS:-10}
IPERF_SECONDS=${IPERF_SECONDS:-10}
SIMPLE_SWITCH=${SIMPLE_SWITCH:-simple_switch}
SIMPLE_SWITCH_CLI=${SIMPLE_SWITCH_CLI:-simple_switch_CLI}
SC=$ROOT/p4/virt/scenarios
mkdir -p "$OUT"
timed_arg=()
((TIMED)) && timed_arg=(--timed --packets "${PACKETS:-200000}")
# The counted table (with --timed also the in-memory rates; the veth rows are appended to its
# Markdown).
"$TERN" virt bench --scenarios "$SC" --out "$OUT" "${timed_arg[@]}" || exit 1

plot() {
  local py=$ROOT/.venv-plot/bin/python
  if ! "$py" -c "import matplotlib" 2>/dev/null; then
    { python3 -m venv "$ROOT/.venv-plot" && "$ROOT/.venv-plot/bin/pip" install -q matplotlib; } \
      >/dev/null 2>&1 || {
      echo "no matplotlib (pip install matplotlib into .venv-plot failed): no plot"
      return
    }
  fi
  "$py" "$ROOT/scripts/virt/plot.py" "$OUT"
}

if ((!TIMED)); then
  plot
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "veth runs skipped: need root"
  plot
  exit 0
fi

if ! command -v iperf3 >/dev/null; then
  echo "installing iperf3 for the bandwidth leg (apt-get install -y iperf3)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends iperf3 >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends iperf3; } >/dev/null 2>&1 ||
    echo "iperf3 could not be installed: bandwidth not measured"
fi
BMV2=0
# shellcheck disable=SC2086 # SIMPLE_SWITCH_CLI may be a command with arguments
if command -v "$SIMPLE_SWITCH" >/dev/null && command -v ${SIMPLE_SWITCH_CLI%% *} >/dev/null; then
  BMV2=1
else
  echo "BMv2 ($SIMPLE_SWITCH, $SIMPLE_SWITCH_CLI) not installed: its column is n/a"
fi

P=tb$$
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tern-virt-bench-XXXXXX")
SW=
HELPERS=()
cleanup() {
  virt_teardown
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One topology per function: two hosts a (port A) and b (port B), static neighbours.
# host NAME ...: namespace $P-NAME, its eth0 paired with ${P}NAME in the switch namespace.
host() { # NAME MAC ADDR/PLEN [GW GW_MAC [SWITCH_NS]]
  local ns=$P-$1 swns=${6:-$P-sw}
  attach_host "$ns" "$swns" "${P}$1" "$2" "$3"
  # MTU-sized frames only (no TSO/GSO super-frames the switch could not send on), as the
  # scenarios do; the switch's side does not merge frames either (GRO off).
  ip netns exec "$ns" ethtool -K eth0 tso off gso off gro off >/dev/null 2>&1 || true
  ip netns exec "$swns" ethtool -K "${P}$1" gro off >/dev/null 2>&1 || true
  if [[ -n ${4:-} ]]; then
    ip -n "$ns" route add default via "$4" dev eth0
    ip -n "$ns" neigh replace "$4" lladdr "$5" dev eth0 nud permanent
  fi
}
switch_ns() { # NAME
  ip netns add "$P-$1"
  ip netns exec "$P-$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}
static_pair() { # A ADDR_A MAC_A B ADDR_B MAC_B: each host knows the other's MAC
  ip -n "$P-$1" neigh replace "$5" lladdr "$6" dev eth0 nud permanent
  ip -n "$P-$4" neigh replace "$2" lladdr "$3" dev eth0 nud permanent
}
topology() { # FN
  switch_ns sw
  case $1 in
  router)
    host a 00:00:00:00:00:01 10.0.0.1/24 10.0.0.5 00:00:00:00:0a:0a
    host b 00:00:00:00:00:03 10.0.1.3/24 10.0.1.1 00:00:00:00:0a:0a
    DST=10.0.1.3
    ;;
  *)
    host a 00:00:00:00:00:01 10.0.0.1/24
    host b 00:00:00:00:00:02 10.0.0.2/24
    static_pair a 10.0.0.1 00:00:00:00:00:01 b 10.0.0.2 00:00:00:00:00:02
    DST=10.0.0.2
    ;;
  esac
}
start() { # NS LOG COMMAND...: a switch in NS, waited for until it switches
  local ns=$1 log=$2 i pid
  shift 2
  ip netns exec "$P-$ns" "$@" >"$log" 2>&1 &
  pid=$!
  [[ -z $SW ]] && SW=$pid
  for i in $(seq 600); do
    grep -q "switching on" "$log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  return 1
}
start_bmv2() { # NS LOG COMMANDS JSON PORT@IFACE...: BMv2 in NS, its commands loaded once it answers
  local ns=$1 log=$2 cmds=$3 json=$4 i pid ifs=()
  shift 4
  for i in "$@"; do ifs+=(-i "$i"); done
  # Its own namespace: the Thrift port cannot collide with anything (on its loopback).
  ip -n "$P-$ns" link set lo up
  ip netns exec "$P-$ns" "$SIMPLE_SWITCH" "${ifs[@]}" --thrift-port 9090 "$json" >"$log" 2>&1 &
  pid=$!
  SW=$pid
  for i in $(seq 150); do
    sleep 0.2
    kill -0 "$pid" 2>/dev/null || break
    # shellcheck disable=SC2086
    ip netns exec "$P-$ns" $SIMPLE_SWITCH_CLI --thrift-port 9090 <"$cmds" >"$log.cli" 2>&1 &&
      ! grep -qi "error\|exception" "$log.cli" && return 0
  done
  cat "$log" "$log.cli" >&2
  return 1
}
# FN -> program, command file, and its two ports in functions/virt.json
declare -A PROG=([l2]=l2_switch.p4 [firewall]=firewall_l4.p4 [router]=router.p4 [arp_proxy]=arp_proxy.p4)
declare -A CMDS=([l2]=ex1/s1_l2.txt [firewall]=ex1/s2_fw_b.txt [router]=ex1/s2_router.txt [arp_proxy]=functions/arp_proxy.txt)
declare -A PORTS=([l2]="1 2" [firewall]="4 5" [router]="6 7" [arp_proxy]="8 9")

# Example 1 B or C from h1 (s1 port 1) to h3 (s3 port 1). native: three tern processes (s1, s2,
# s3) wired by veth pairs, s2 the firewall (B) or the hand-merged ARP proxy + firewall + router
# (C, s2_merged.p4); sliced: one tern virt run of ex1/virt.json with the snapshot.
ex1_topology() { # PHASE MODE
  local phase=$1 mode=$2
  if [[ $mode == native ]]; then
    switch_ns sw
    switch_ns sw2
    switch_ns sw3
    ip -n "$P-sw" link add "${P}u1" type veth peer name "${P}d1" netns "$P-sw2"
    ip -n "$P-sw2" link add "${P}d2" type veth peer name "${P}u3" netns "$P-sw3"
    ip -n "$P-sw" link set "${P}u1" up
    ip -n "$P-sw2" link set "${P}d1" up
    ip -n "$P-sw2" link set "${P}d2" up
    ip -n "$P-sw3" link set "${P}u3" up
  else
    switch_ns sw
  fi
  local s3ns=$P-sw
  [[ $mode == native ]] && s3ns=$P-sw3
  if [[ $phase == B ]]; then
    host a 00:00:00:00:00:01 10.0.0.1/24
    host b 00:00:00:00:00:03 10.0.0.3/24 "" "" "$s3ns"
    static_pair a 10.0.0.1 00:00:00:00:00:01 b 10.0.0.3 00:00:00:00:00:03
    DST=10.0.0.3
  else
    host a 00:00:00:00:00:01 10.0.0.1/24 10.0.0.5 00:00:00:00:0a:0a
    host b 00:00:00:00:00:03 10.0.1.3/24 10.0.1.1 00:00:00:00:0a:0a "$s3ns"
    DST=10.0.1.3
  fi
  if [[ $mode == native ]]; then
    local s2=(firewall_l4.p4 ex1/s2_fw_b.txt)
    [[ $phase == C ]] && s2=(scenarios/ex1/s2_merged.p4 ex1/s2_merged.txt)
    start sw "$TMP/s1.log" "$TERN" run -i "1@${P}a" -i "3@${P}u1" \
      --commands "$SC/ex1/s1_l2.txt" "$ROOT/p4/virt/l2_switch.p4" || return 1
    start sw2 "$TMP/s2.log" "$TERN" run -i "1@${P}d1" -i "2@${P}d2" \
      --commands "$SC/${s2[1]}" "$ROOT/p4/virt/${s2[0]}" || return 1
    start sw3 "$TMP/s3.log" "$TERN" run -i "1@${P}b" -i "3@${P}u3" \
      --commands "$SC/ex1/s3_l2.txt" "$ROOT/p4/virt/l2_switch.p4" || return 1
  else
    start sw "$TMP/sw.log" "$TERN" virt run "$SC/ex1/virt.json" --live --snapshot "$phase" \
      -i "1@${P}a" -i "3@${P}b" || return 1
  fi
}

# Round-trip times of COUNT pings sent one at a time (every 1 ms) from host a to DST: "p50,p99"
# in microseconds (null,null when no echo came back).
rtt_p50_p99() {
  ip netns exec "$P-a" ping -c "$COUNT" -i 0.001 -W 1 "$DST" 2>/dev/null |
    sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' | sort -g |
    awk '{ v[NR] = $1 * 1000 }
         END { if (NR == 0) { print "null,null"; exit }
               i50 = int((NR - 1) * 0.50 + 0.5) + 1; i99 = int((NR - 1) * 0.99 + 0.5) + 1
               printf "%.0f,%.0f\n", v[i50], v[i99] }'
}

measure() { # FN MODE(native|sliced): prints one JSON object
  local fn=$1 mode=$2 pa pb times=() p50s=() p99s=() bw=null r t q
  case $fn in
  ex1_B | ex1_C) ex1_topology "${fn#ex1_}" "$mode" || return 1 ;;
  *)
    read -r pa pb <<<"${PORTS[$fn]}"
    topology "$fn"
    if [[ $mode == native ]]; then
      start sw "$TMP/sw.log" "$TERN" run -i "1@${P}a" -i "2@${P}b" \
        --commands "$SC/${CMDS[$fn]}" "$ROOT/p4/virt/${PROG[$fn]}" || return 1
    elif [[ $mode == bmv2 ]]; then
      "$TERN" compile "$ROOT/p4/virt/${PROG[$fn]}" -o "$TMP/$fn.json" >"$TMP/compile.log" 2>&1 || {
        cat "$TMP/compile.log" >&2
        return 1
      }
      start_bmv2 sw "$TMP/sw.log" "$SC/${CMDS[$fn]}" "$TMP/$fn.json" "1@${P}a" "2@${P}b" || return 1
    else
      start sw "$TMP/sw.log" "$TERN" virt run "$SC/functions/virt.json" --live \
        -i "$pa@${P}a" -i "$pb@${P}b" || return 1
    fi
    ;;
  esac
  ip netns exec "$P-a" ping -c 3 -W 2 -q "$DST" >/dev/null || {
    echo "$fn $mode: no ping through the switch" >&2
    return 1
  }
  for r in $(seq "$RUNS"); do
    t=$(ip netns exec "$P-a" ping -f -c "$COUNT" -q "$DST" | sed -n 's/.*received, .* time \([0-9]*\)ms.*/\1/p')
    times+=("${t:-null}")
    q=$(rtt_p50_p99)
    p50s+=("${q%,*}")
    p99s+=("${q#*,}")
  done
  if command -v iperf3 >/dev/null; then
    ip netns exec "$P-b" iperf3 -s -1 >/dev/null 2>&1 &
    HELPERS+=($!)
    sleep 0.5
    bw=$(ip netns exec "$P-a" iperf3 -c "$DST" -t "$IPERF_SECONDS" -J 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6)' 2>/dev/null || echo null)
  fi
  virt_teardown
  local IFS=,
  echo "{\"function\": \"$fn\", \"mode\": \"$mode\", \"ping_flood_count\": $COUNT, \"ping_flood_ms\": [${times[*]}], \"rtt_p50_us\": [${p50s[*]}], \"rtt_p99_us\": [${p99s[*]}], \"iperf3_mbit_s\": $bw}"
}

{
  echo "["
  first=1
  for fn in l2 firewall router arp_proxy ex1_B ex1_C; do
    modes=(native sliced)
    ((BMV2)) && [[ $fn != ex1_* ]] && modes+=(bmv2)
    for mode in "${modes[@]}"; do
      row=$(measure "$fn" "$mode") || exit 1
      ((first)) || echo ","
      first=0
      echo "  $row"
    done
  done
  echo "]"
} >"$OUT/veth.json.tmp" && mv "$OUT/veth.json.tmp" "$OUT/veth.json"
command -v iperf3 >/dev/null || echo "iperf3 not installed (apt-get install iperf3): bandwidth not measured"
echo "wrote $OUT/veth.json"
# The veth rows beside HyPer4's (median of the runs), appended to the Markdown table.
python3 - "$OUT" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
rows = json.load(open(os.path.join(d, "veth.json")))
hp4 = {"l2": ("3.4x", "-83 %"), "firewall": ("4.7x", "-89 %"), "router": ("-", "-"), "arp_proxy": ("-", "-"),
       "ex1_B": ("3.4x", "-83 %"), "ex1_C": ("3.9x", "-88 %")}
by = {(r["function"], r["mode"]): r for r in rows}
med = lambda v: statistics.median([x for x in v if x is not None]) if any(x is not None for x in v) else None
out = ["", "## On veth (ping -f -c %d total time, median of %d runs; iperf3 TCP)" % (rows[0]["ping_flood_count"], len(rows[0]["ping_flood_ms"])), "",
       "| function | HyPer4 ping-flood factor | tern native ms | tern sliced ms | factor | BMv2 ms | HyPer4 bandwidth | tern native Mbit/s | tern sliced Mbit/s | BMv2 Mbit/s |",
       "|---|---|---|---|---|---|---|---|---|---|"]
na = lambda v: "n/a" if v is None else ("%.1f" % v if isinstance(v, float) else str(v))
for fn in ["l2", "firewall", "router", "arp_proxy", "ex1_B", "ex1_C"]:
    n, s, b = by[(fn, "native")], by[(fn, "sliced")], by.get((fn, "bmv2"))
    mn, ms = med(n["ping_flood_ms"]), med(s["ping_flood_ms"])
    mb = med(b["ping_flood_ms"]) if b else None
    f = "%.2fx" % (ms / mn) if mn and ms else "-"
    out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        fn, hp4[fn][0], na(mn), na(ms), f, na(mb), hp4[fn][1], na(n["iperf3_mbit_s"]),
        na(s["iperf3_mbit_s"]), na(b["iperf3_mbit_s"] if b else None)))
out += ["", "## On veth, one ping at a time (round-trip µs, p50 / p99 per run, median of %d runs)" % len(rows[0]["ping_flood_ms"]), "",
        "| function | native p50 / p99 | sliced p50 / p99 | p50 sliced vs native | p99 sliced vs native |",
        "|---|---|---|---|---|"]
pct = lambda s, n: "%+.1f %%" % (100.0 * (s / n - 1.0)) if s and n else "-"
for fn in ["l2", "firewall", "router", "arp_proxy", "ex1_B", "ex1_C"]:
    n, s = by[(fn, "native")], by[(fn, "sliced")]
    n50, n99 = med(n.get("rtt_p50_us", [])), med(n.get("rtt_p99_us", []))
    s50, s99 = med(s.get("rtt_p50_us", [])), med(s.get("rtt_p99_us", []))
    out.append("| %s | %s / %s | %s / %s | %s | %s |" % (fn, na(n50), na(n99), na(s50), na(s99), pct(s50, n50), pct(s99, n99)))
open(os.path.join(d, "virt_bench.md"), "a").write("\n".join(out) + "\n")
PY
plot
