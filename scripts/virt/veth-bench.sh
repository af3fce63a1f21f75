#!/usr/bin/env bash
# Sliced vs native on veth, measured well enough to judge "within 5 %" (issue 17): packet rate
# and one-way latency of a function run natively (`tern run PROGRAM`, its command file) and as
# a device of one sliced tern (`tern virt run p4/virt/scenarios/functions/virt.json --live`),
# alternated A B B A ... in the same set-up so drift cancels. Also Example 1 B (s1 L2 ->
# s2 firewall -> s3 L2): three native `tern run` processes on veth vs one sliced tern.
#
#   scripts/virt/veth-bench.sh [--out DIR] [--tern PATH] [--probe PATH]
#   (also `scripts/virt/bench.sh --veth`)
#
# Root only (skipped with a message and exit 0 otherwise). Needs release builds:
#   cargo build --release -p tern --bin tern -p tern-ports --example veth_probe
#
# Set-up per function: namespace P-probe holds the hosts' ends of four veth pairs, two per
# veth set (n: na nb, s: sa sb); one switch owns the other ends of set n (namespace P-n, or
# P-n1..3 for the native chain), the other those of set s. Native runs on set n for the first
# half of the rounds and on set s for the second (the sets are rebuilt, swapped), so that a
# difference between the sets cancels. Both switches run throughout; the idle one sleeps in
# poll(). The probe (crates/tern-ports/examples/veth_probe.rs) sends IPv4/UDP
# frames out of one host end and sees them arrive on the other:
# * rate: batches of 64 frames as fast as `sendmmsg` goes, RATE_SECS; delivered frames/s
#   (the far end's rx_packets), loss, and the switch processes' CPU time per delivered frame;
# * latency: LAT_PPS frames/s (open loop, each flushed alone), LAT_SECS; the payload carries
#   the send time, the same process reads it on arrival: one-way p50 / p99 / p99.9, each side's
#   rounds pooled. LAT_WAIT=paired (default): in every round one spinning probe sends to both
#   switches in turn (LAT_PPS each, default 10,000; A B B A ... frame by frame), so a stall
#   of the machine delays both sides' frames alike (no probe wake-up in the path);
#   LAT_WAIT=spin: the same spinning probe, one side after the other (on a busy machine the
#   kernel takes the CPU away for its other tasks now and then, a few-ms stall in one run in
#   ten, on one side only);
#   LAT_WAIT=sleep: a sending thread sleeps between frames and the receiver blocks in poll()
#   (adds the probe's wake-up, ~30 µs here, to every delay; leaves the CPU idle between).
# Every round measures both sides (rate: order A B in odd rounds, B A in even ones; latency
# paired, or in that order); the ratio sliced / native is taken per round. Summary per function: median per side, the
# median per-round ratio, its min-max and a 95 % bootstrap interval (resampling rounds), and
# a verdict: "within 5 %" when the interval stays on the good side of 5 % (rate >= 0.95x,
# latency <= 1.05x), "beyond 5 %" when it lies wholly past it, else "unresolved".
# CPU placement: the probe on GEN_CPU (default 0), every switch process on SW_CPU (default 1),
# both SCHED_FIFO priority 50 (SCHED=fifo, the default: a busy machine's other tasks cannot
# preempt them; runs are kept under the kernel's real-time throttle) or nice -20 (SCHED=nice)
# or as started (SCHED=none). Example 1 B's switches (three native on one CPU vs one sliced)
# run at nice -20 under SCHED=fifo (FIFO tasks of one priority do not share a CPU).
# CONTROL=1: an A/A run, the "sliced" side is a second native `tern run` on its own veths:
# its ratios show what the measurement itself spreads (should be 1 within the interval).
# Defaults: ROUNDS=8 RATE_SECS=0.4 LAT_SECS=0.5 LAT_PPS=10000 (paired) WARMUP=0.2,
# FUNCTIONS="l2 firewall router arp_proxy ex1_B" (about 2.5 minutes).
# Writes DIR/veth_abba.json (every measurement and the summary) and DIR/veth_abba.md.
# Namespaces, veths and processes are removed on exit, also on failure and Ctrl-C.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/virt/common.sh
. "$ROOT/scripts/virt/common.sh"
OUT=$ROOT/bench/virt
TERN=$ROOT/target/release/tern
PROBE=$ROOT/target/release/examples/veth_probe
while (($#)); do
  case $1 in
  --out) OUT=$2 && shift ;;
  --tern) TERN=$2 && shift ;;
  --probe) PROBE=$2 && shift ;;
  *)
    echo "usage: $0 [--out DIR] [--tern PATH] [--probe PATH]" >&2
    exit 2
    ;;
  esac
  shift
done
if [[ $(id -u) != 0 ]]; then
  echo "veth bench skipped: need root"
  exit 0
fi
for b in "$TERN" "$PROBE"; do
  [[ -x $b ]] || {
    echo "missing $b: cargo build --release -p tern --bin tern -p tern-ports --example veth_probe" >&2
    exit 1
  }
done
ROUNDS=${ROUNDS:-8}
RATE_SECS=${RATE_SECS:-0.4}
LAT_SECS=${LAT_SECS:-0.5}
LAT_PPS=${LAT_PPS:-}
WARMUP=${WARMUP:-0.2}
GEN_CPU=${GEN_CPU:-0}
SW_CPU=${SW_CPU:-1}
FUNCTIONS=${FUNCTIONS:-l2 firewall router arp_proxy ex1_B}
SCHED=${SCHED:-fifo}
# LAT_PPS: frames/s per side (paired: 10,000 each, a frame every 50 µs alternating between
# the two switches, which share a CPU; one side at a time: 20,000).
case ${LAT_WAIT:-paired} in
paired) LAT_MODE=paired LAT_PPS=${LAT_PPS:-10000} ;;
spin) LAT_MODE=latency-spin LAT_PPS=${LAT_PPS:-20000} ;;
sleep) LAT_MODE=latency LAT_PPS=${LAT_PPS:-20000} ;;
*)
  echo "LAT_WAIT: paired, spin or sleep" >&2
  exit 2
  ;;
esac
CONTROL=${CONTROL:-0}
case $SCHED in
nice) PRIO=(nice -n -20) ;;
fifo) PRIO=(chrt -f 50) ;;
none) PRIO=() ;;
*)
  echo "SCHED: nice, fifo or none" >&2
  exit 2
  ;;
esac
# SCHED_FIFO leaves other tasks 5 % of each second (sched_rt_runtime_us): a spinning probe run
# must stay under it, with a pause between runs.
if [[ $SCHED == fifo ]] && ! python3 -c "import sys; sys.exit(not $WARMUP + max($RATE_SECS, $LAT_SECS) + 0.05 <= 0.9)"; then
  echo "SCHED=fifo: WARMUP + max(RATE_SECS, LAT_SECS) must stay within 0.85 s (or SCHED=nice)" >&2
  exit 2
fi
SC=$ROOT/p4/virt/scenarios
P=vb$$
TMP=$(mktemp -d "${TMPDIR:-/tmp}/tern-veth-bench-XXXXXX")
PIDS=()

teardown() { # every switch, then every namespace of this run (their veths go with them)
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do stop_pid "$p" 30; done
  PIDS=()
  delete_run_netns
}
cleanup() {
  teardown
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

netns() { # NAME: a namespace without IPv6 (no stray router solicitations on the counters)
  ip netns add "$P-$1" || return 1
  ip netns exec "$P-$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$P-$1" link set lo up
}
pair() { # NS_A IF_A NS_B IF_B: a veth pair, both ends up, no GRO
  ip -n "$P-$1" link add "$2" type veth peer name "$4" netns "$P-$3" || return 1
  ip -n "$P-$1" link set "$2" up
  ip -n "$P-$3" link set "$4" up
  ip netns exec "$P-$1" ethtool -K "$2" gro off >/dev/null 2>&1
  ip netns exec "$P-$3" ethtool -K "$4" gro off >/dev/null 2>&1
  return 0
}
start() { # NS LOG COMMAND...: a switch pinned to SW_CPU, waited for until it switches
  local ns=$1 log=$2 i pid
  shift 2
  ip netns exec "$P-$ns" taskset -c "$SW_CPU" "${SW_PRIO[@]}" "$@" >"$log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  for i in $(seq 600); do
    grep -q "switching on" "$log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "switch did not start: $*" >&2
  cat "$log" >&2
  return 1
}

declare -A PROG=([l2]=l2_switch.p4 [firewall]=firewall_l4.p4 [router]=router.p4 [arp_proxy]=arp_proxy.p4)
declare -A CMDS=([l2]=ex1/s1_l2.txt [firewall]=ex1/s2_fw_b.txt [router]=ex1/s2_router.txt [arp_proxy]=functions/arp_proxy.txt)
declare -A PORTS=([l2]="1 2" [firewall]="4 5" [router]="6 7" [arp_proxy]="8 9")
# Where the probe's frames go (from 00:00:00:00:00:01 / 10.0.0.1): MAC and IPv4 destination.
declare -A DMAC=([l2]=00:00:00:00:00:02 [firewall]=00:00:00:00:00:02 [router]=00:00:00:00:0a:0a
  [arp_proxy]=00:00:00:00:00:02 [ex1_B]=00:00:00:00:00:03)
declare -A DIP=([l2]=10.0.0.2 [firewall]=10.0.0.2 [router]=10.0.1.3 [arp_proxy]=10.0.0.2 [ex1_B]=10.0.0.3)
# The switch pids of each side (for CPU time).
declare -A SIDE_PIDS

# Which veth set (letter n or s: namespaces P-n / P-s or P-n1..3, the probe's na nb / sa sb)
# each side runs on; swapped for the second half of the rounds so that a difference between
# the two sets (creation order, start order) cancels too.
declare -A L
setup() { # FN SWAP: probe namespace, both switches running (set n made and started first)
  local fn=$1 x
  if (($2)); then
    L[native]=s L[sliced]=n
  else
    L[native]=n L[sliced]=s
  fi
  netns probe || return 1
  SW_PRIO=("${PRIO[@]}")
  # Three SCHED_FIFO switches of one priority on one CPU do not share it (the first one busy
  # at saturation starves the other two): Example 1 B's switches, both sides, run at nice -20.
  [[ $fn == ex1_B && $SCHED == fifo ]] && SW_PRIO=(nice -n -20)
  for x in n s; do
    if [[ $x == "${L[native]}" ]]; then
      start_native "$fn" "$x" || return 1
    else
      start_sliced "$fn" "$x" || return 1
    fi
  done
}
start_native() { # FN LETTER
  local fn=$1 x=$2 before=${#PIDS[@]}
  if [[ $fn == ex1_B ]]; then
    netns "${x}1" && netns "${x}2" && netns "${x}3" || return 1
    pair probe "${x}a" "${x}1" "${P}${x}a" && pair probe "${x}b" "${x}3" "${P}${x}b" || return 1
    pair "${x}1" "${P}${x}u1" "${x}2" "${P}${x}d1" && pair "${x}2" "${P}${x}d2" "${x}3" "${P}${x}u3" || return 1
    start "${x}1" "$TMP/${x}1.log" "$TERN" run -i "1@${P}${x}a" -i "3@${P}${x}u1" \
      --commands "$SC/ex1/s1_l2.txt" "$ROOT/p4/virt/l2_switch.p4" || return 1
    start "${x}2" "$TMP/${x}2.log" "$TERN" run -i "1@${P}${x}d1" -i "2@${P}${x}d2" \
      --commands "$SC/ex1/s2_fw_b.txt" "$ROOT/p4/virt/firewall_l4.p4" || return 1
    start "${x}3" "$TMP/${x}3.log" "$TERN" run -i "1@${P}${x}b" -i "3@${P}${x}u3" \
      --commands "$SC/ex1/s3_l2.txt" "$ROOT/p4/virt/l2_switch.p4" || return 1
  else
    netns "$x" || return 1
    pair probe "${x}a" "$x" "${P}${x}a" && pair probe "${x}b" "$x" "${P}${x}b" || return 1
    start "$x" "$TMP/$x.log" "$TERN" run -i "1@${P}${x}a" -i "2@${P}${x}b" \
      --commands "$SC/${CMDS[$fn]}" "$ROOT/p4/virt/${PROG[$fn]}" || return 1
  fi
  SIDE_PIDS[native]="${PIDS[*]:before}"
}
start_sliced() { # FN LETTER (CONTROL=1: a second native switch)
  local fn=$1 x=$2 pa pb
  netns "$x" || return 1
  pair probe "${x}a" "$x" "${P}${x}a" && pair probe "${x}b" "$x" "${P}${x}b" || return 1
  if [[ $fn == ex1_B ]] && ((!CONTROL)); then
    start "$x" "$TMP/$x.log" "$TERN" virt run "$SC/ex1/virt.json" --live --snapshot B \
      -i "1@${P}${x}a" -i "3@${P}${x}b" || return 1
  elif ((CONTROL)); then
    local prog=$ROOT/p4/virt/${PROG[$fn]:-l2_switch.p4} cmds=$SC/${CMDS[$fn]:-ex1/s1_l2.txt}
    [[ $fn == ex1_B ]] && echo "CONTROL=1 with ex1_B: the control side is one native L2 switch" >&2
    start "$x" "$TMP/$x.log" "$TERN" run -i "1@${P}${x}a" -i "2@${P}${x}b" \
      --commands "$cmds" "$prog" || return 1
  else
    read -r pa pb <<<"${PORTS[$fn]}"
    start "$x" "$TMP/$x.log" "$TERN" virt run "$SC/functions/virt.json" --live \
      -i "$pa@${P}${x}a" -i "$pb@${P}${x}b" || return 1
  fi
  SIDE_PIDS[sliced]=${PIDS[-1]}
}

cpu_ns() { # PID...: nanoseconds on CPU of every thread of those processes (schedstat)
  local p
  for p in "$@"; do cat /proc/"$p"/task/*/schedstat; done | awk '{t += $1} END {printf "%.0f\n", t}'
}
probe() { # SIDE(n|s) MODE SECONDS RATE FN: from ${SIDE}a to ${SIDE}b
  ip netns exec "$P-probe" taskset -c "$GEN_CPU" "${PRIO[@]}" "$PROBE" "$2" "${1}a" "${1}b" "$3" "$4" \
    "${DMAC[$5]}" "${DIP[$5]}" "$WARMUP"
}
probe_paths() { # TX,TX RX,RX FN: the spinning latency probe over two paths, frame by frame
  ip netns exec "$P-probe" taskset -c "$GEN_CPU" "${PRIO[@]}" "$PROBE" latency-spin "$1" "$2" \
    "$LAT_SECS" "$LAT_PPS" "${DMAC[$3]}" "${DIP[$3]}" "$WARMUP"
}
rate_of() { # FN SIDE: sets RATE[SIDE] (the probe's report) and CPU[SIDE] (switch ns)
  local fn=$1 side=$2 c0 c1
  # shellcheck disable=SC2086 # a list of pids
  c0=$(cpu_ns ${SIDE_PIDS[$side]})
  # Under SCHED=fifo a spinning probe must leave the kernel's real-time throttle room.
  [[ $SCHED == fifo ]] && sleep 0.2
  RATE[$side]=$(probe "${L[$side]}" rate "$RATE_SECS" 0 "$fn") || return 1
  # shellcheck disable=SC2086
  c1=$(cpu_ns ${SIDE_PIDS[$side]})
  CPU[$side]=$((c1 - c0))
}
round() { # FN ROUND SIDE SIDE (in this round's order): two JSON lines
  local fn=$1 r=$2 first=$3 second=$4 side out
  declare -A RATE CPU LAT
  rate_of "$fn" "$first" && rate_of "$fn" "$second" || return 1
  [[ $SCHED == fifo ]] && sleep 0.2
  if [[ $LAT_MODE == paired ]]; then
    # One probe, frames alternating between the two switches (this round's first side first).
    out=$(probe_paths "${L[$first]}a,${L[$second]}a" "${L[$first]}b,${L[$second]}b" "$fn") || return 1
    LAT[$first]=$(sed -n 1p <<<"$out")
    LAT[$second]=$(sed -n 2p <<<"$out")
  else
    for side in "$first" "$second"; do
      LAT[$side]=$(probe "${L[$side]}" "$LAT_MODE" "$LAT_SECS" "$LAT_PPS" "$fn") || return 1
      [[ $SCHED == fifo ]] && sleep 0.2
    done
  fi
  for side in "$first" "$second"; do
    echo "{\"function\": \"$fn\", \"side\": \"$side\", \"round\": $r, \"veths\": \"${L[$side]}\", \"switch_cpu_ns\": ${CPU[$side]}, \"rate\": ${RATE[$side]}, \"latency\": ${LAT[$side]}}"
  done
}

ROWS=$TMP/rows.jsonl
: >"$ROWS"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date -u +%FT%TZ)
for fn in $FUNCTIONS; do
  [[ -n ${DIP[$fn]:-} ]] || {
    echo "unknown function $fn (l2 firewall router arp_proxy ex1_B)" >&2
    exit 2
  }
  # Rounds 1 .. ROUNDS/2 with native on veth set n, the rest with the sets swapped.
  for swap in 0 1; do
    first_set=native
    ((swap)) && first_set=sliced
    echo "== $fn: setting up (veth set n: $first_set)"
    setup "$fn" "$swap" || exit 1
    # Both paths must forward the probe's frames before anything is timed.
    for s in n s; do
      chk=$(ip netns exec "$P-probe" "$PROBE" latency "${s}a" "${s}b" 0.2 2000 "${DMAC[$fn]}" "${DIP[$fn]}" 0.05) || exit 1
      [[ $chk =~ \"received\":\ ([0-9]+) ]] && ((BASH_REMATCH[1] > 0)) || {
        echo "$fn: the $s path forwards nothing: $chk" >&2
        cat "$TMP"/*.log >&2
        exit 1
      }
    done
    from=1 to=$((ROUNDS / 2))
    ((swap)) && from=$((ROUNDS / 2 + 1)) to=$ROUNDS
    for ((r = from; r <= to; r++)); do
      order=(native sliced)
      ((r % 2 == 0)) && order=(sliced native)
      round "$fn" "$r" "${order[@]}" >>"$ROWS" || {
        echo "$fn round $r failed" >&2
        exit 1
      }
      echo "   round $r/$ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))"
    done
    teardown
  done
done
T1=$(date -u +%FT%TZ)
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
mkdir -p "$OUT"
META="{\"start\": \"$T0\", \"end\": \"$T1\", \"load_start\": \"$LOAD0\", \"load_end\": \"$LOAD1\", \"nproc\": $(nproc), \"rounds\": $ROUNDS, \"rate_seconds\": $RATE_SECS, \"latency_seconds\": $LAT_SECS, \"latency_pps\": $LAT_PPS, \"warmup_seconds\": $WARMUP, \"probe_cpu\": $GEN_CPU, \"sched\": \"$SCHED\", \"latency_probe\": \"$LAT_MODE\", \"control\": $CONTROL, \"switch_cpu\": $SW_CPU, \"kernel\": \"$(uname -r)\"}"
python3 "$ROOT/scripts/virt/veth_abba.py" "$ROWS" "$META" "$OUT" || exit 1
