#!/usr/bin/env bash
# HyPer4's penalty table on tern, one command: writes bench/virt/ (or OUT).
#
#   scripts/virt/bench.sh [--timed] [--out DIR] [--tern PATH]
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
# `tern virt run p4/virt/scenarios/functions/virt.json` -> DIR/veth.json.
# COUNT (default 1000), RUNS (default 10) and PACKETS (in memory, default 200000) shrink the
# timed runs for a smoke test.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TIMED=0
OUT=$ROOT/bench/virt
TERN=$ROOT/target/debug/tern
while (($#)); do
  case $1 in
  --timed) TIMED=1 ;;
  --out)
    OUT=$2
    shift
    ;;
  --tern)
    TERN=$2
    shift
    ;;
  *)
    echo "usage: $0 [--timed] [--out DIR] [--tern PATH]" >&2
    exit 2
    ;;
  esac
  shift
done
COUNT=${COUNT:-1000}
RUNS=${RUNS:-10}
SC=$ROOT/p4/virt/scenarios
mkdir -p "$OUT"
timed_arg=()
((TIMED)) && timed_arg=(--timed --packets "${PACKETS:-200000}")
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

P=tb$$
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tern-virt-bench-XXXXXX")
SW=
HELPERS=()
teardown() {
  local p ns i
  for p in "${HELPERS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  if [[ -n $SW ]]; then
    kill -TERM "$SW" 2>/dev/null
    for i in $(seq 50); do
      kill -0 "$SW" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SW" 2>/dev/null
    wait "$SW" 2>/dev/null
    SW=
  fi
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P-"); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  HELPERS=()
}
cleanup() {
  teardown
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One topology per function: two hosts a (port A) and b (port B), static neighbours.
# setup FN: creates namespaces $P-sw, $P-a, $P-b; interfaces ${P}a, ${P}b in $P-sw.
host() { # NAME MAC ADDR/PLEN GW GW_MAC
  local ns=$P-$1
  ip netns add "$ns"
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$P-sw" link add "${P}$1" type veth peer name eth0 netns "$ns"
  ip -n "$ns" link set eth0 address "$2"
  ip -n "$ns" addr add "$3" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  ip -n "$P-sw" link set "${P}$1" up
  if [[ -n ${4:-} ]]; then
    ip -n "$ns" route add default via "$4" dev eth0
    ip -n "$ns" neigh replace "$4" lladdr "$5" dev eth0 nud permanent
  fi
}
topology() { # FN
  ip netns add "$P-sw"
  ip netns exec "$P-sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  case $1 in
  router)
    host a 00:00:00:00:00:01 10.0.0.1/24 10.0.0.5 00:00:00:00:0a:0a
    host b 00:00:00:00:00:03 10.0.1.3/24 10.0.1.1 00:00:00:00:0a:0a
    DST=10.0.1.3
    ;;
  *)
    host a 00:00:00:00:00:01 10.0.0.1/24
    host b 00:00:00:00:00:02 10.0.0.2/24
    ip -n "$P-a" neigh replace 10.0.0.2 lladdr 00:00:00:00:00:02 dev eth0 nud permanent
    ip -n "$P-b" neigh replace 10.0.0.1 lladdr 00:00:00:00:00:01 dev eth0 nud permanent
    DST=10.0.0.2
    ;;
  esac
}
wait_up() {
  local i
  for i in $(seq 600); do
    grep -q "switching on" "$TMP/sw.log" 2>/dev/null && return 0
    kill -0 "$SW" 2>/dev/null || break
    sleep 0.1
  done
  cat "$TMP/sw.log" >&2
  return 1
}
# FN -> program, command file, and its two ports in functions/virt.json
declare -A PROG=([l2]=l2_switch.p4 [firewall]=firewall_l4.p4 [router]=router.p4 [arp_proxy]=arp_proxy.p4)
declare -A CMDS=([l2]=ex1/s1_l2.txt [firewall]=ex1/s2_fw_b.txt [router]=ex1/s2_router.txt [arp_proxy]=functions/arp_proxy.txt)
declare -A PORTS=([l2]="1 2" [firewall]="4 5" [router]="6 7" [arp_proxy]="8 9")

measure() { # FN MODE(native|sliced): prints one JSON object
  local fn=$1 mode=$2 pa pb times=() bw=null r t
  read -r pa pb <<<"${PORTS[$fn]}"
  topology "$fn"
  if [[ $mode == native ]]; then
    ip netns exec "$P-sw" "$TERN" run -i "1@${P}a" -i "2@${P}b" \
      --commands "$SC/${CMDS[$fn]}" "$ROOT/p4/virt/${PROG[$fn]}" >"$TMP/sw.log" 2>&1 &
  else
    ip netns exec "$P-sw" "$TERN" virt run "$SC/functions/virt.json" --live \
      -i "$pa@${P}a" -i "$pb@${P}b" >"$TMP/sw.log" 2>&1 &
  fi
  SW=$!
  wait_up || return 1
  ip netns exec "$P-a" ping -c 3 -W 2 -q "$DST" >/dev/null || {
    echo "$fn $mode: no ping through the switch" >&2
    return 1
  }
  for r in $(seq "$RUNS"); do
    t=$(ip netns exec "$P-a" ping -f -c "$COUNT" -q "$DST" | sed -n 's/.*received, .* time \([0-9]*\)ms.*/\1/p')
    times+=("${t:-null}")
  done
  if command -v iperf3 >/dev/null; then
    ip netns exec "$P-b" iperf3 -s -1 >/dev/null 2>&1 &
    HELPERS+=($!)
    sleep 0.5
    bw=$(ip netns exec "$P-a" iperf3 -c "$DST" -t 10 -J 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6)' 2>/dev/null || echo null)
  fi
  teardown
  local IFS=,
  echo "{\"function\": \"$fn\", \"mode\": \"$mode\", \"ping_flood_count\": $COUNT, \"ping_flood_ms\": [${times[*]}], \"iperf3_mbit_s\": $bw}"
}

{
  echo "["
  first=1
  for fn in l2 firewall router arp_proxy; do
    for mode in native sliced; do
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
hp4 = {"l2": ("3.4x", "-83 %"), "firewall": ("4.7x", "-89 %"), "router": ("-", "-"), "arp_proxy": ("-", "-")}
by = {(r["function"], r["mode"]): r for r in rows}
med = lambda v: statistics.median([x for x in v if x is not None]) if any(x is not None for x in v) else None
out = ["", "## On veth (ping -f -c %d total time, median of %d runs; iperf3 TCP)" % (rows[0]["ping_flood_count"], len(rows[0]["ping_flood_ms"])), "",
       "| function | HyPer4 ping-flood factor | tern native ms | tern sliced ms | factor | HyPer4 bandwidth | tern native Mbit/s | tern sliced Mbit/s |",
       "|---|---|---|---|---|---|---|---|"]
for fn in ["l2", "firewall", "router", "arp_proxy"]:
    n, s = by[(fn, "native")], by[(fn, "sliced")]
    mn, ms = med(n["ping_flood_ms"]), med(s["ping_flood_ms"])
    f = "%.2fx" % (ms / mn) if mn and ms else "-"
    out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (fn, hp4[fn][0], mn, ms, f, hp4[fn][1], n["iperf3_mbit_s"], s["iperf3_mbit_s"]))
open(os.path.join(d, "virt_bench.md"), "a").write("\n".join(out) + "\n")
PY
plot
