#!/usr/bin/env bash
# The headline in-memory figures of bench/RESULTS.md, taken the way the guide asks: only on a
# quiet machine (1-minute load average checked before and after), runs of the compared variants
# alternated round by round, min / median / max per variant, one Markdown table at the end.
#
#   bench/quiet.sh [--bin PATH]... [--rounds N] [--packets N] [--max-load L] [--wait SECONDS]
#                  [--out DIR] [--list] [CASE ...]
#
# Without CASE it runs every case below. Several --bin compare binaries (e.g. the previous
# commit's release build and this one's): every round runs each case with each binary in turn,
# and the table gives each binary's row and its median against the first --bin's. Each run writes `tern bench --json` output to
# OUT/CASE.roundR.json (OUT defaults to a fresh folder under target/quiet/); the summary goes to
# standard output and OUT/summary.md. The release binary is built first if --bin is not given.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bins=() rounds=3 packets="" max_load=1.0 wait_s=600 out="" list=0
cases=()
while [ $# -gt 0 ]; do
    case "$1" in
    --bin) bins+=("$2"); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --packets) packets=$2; shift 2 ;;
    --max-load) max_load=$2; shift 2 ;;
    --wait) wait_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --list) list=1; shift ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "quiet.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) cases+=("$1"); shift ;;
    esac
done

# name | what is compared | tern bench arguments (packets are appended)
table() {
    cat <<'EOF'
l3|L3 router (built in), 1,000 /24 routes, 1,024 flows|
l2l3|L2/L3/ACL/NAT|p4/bench/l2l3_acl_nat.p4
p20|20-table pipeline|p4/bench/pipeline20.p4
kv-get-farreach|farreach.p4, cached GETs only|p4/kv/farreach.p4 --kv --kv-hits-only
kv-get-netcache|netcache.p4, cached GETs only|p4/kv/netcache.p4 --kv --kv-hits-only
kv-mix-farreach|farreach.p4, 50 % GETs|p4/kv/farreach.p4 --kv --kv-get-ratio 0.5
kv-mix-forward|forward.p4 (NoCache), 50 % GETs|p4/kv/forward.p4 --kv --kv-get-ratio 0.5
case4|B-Cache case #4, own traffic, cache off|p4/bcache/case4.p4 --traffic case4 --flows 4096
case4-bcache|B-Cache case #4, own traffic, --bcache|p4/bcache/case4.p4 --traffic case4 --flows 4096 --bcache
p20-bcache|20-table pipeline, --bcache|p4/bench/pipeline20.p4 --bcache
EOF
}

if [ "$list" = 1 ]; then
    table | awk -F'|' '{ printf "%-18s %s\n", $1, $2 }'
    exit 0
fi
if [ ${#cases[@]} -eq 0 ]; then
    mapfile -t cases < <(table | cut -d'|' -f1)
fi
for c in "${cases[@]}"; do
    table | cut -d'|' -f1 | grep -qx "$c" || { echo "quiet.sh: unknown case '$c' (see --list)" >&2; exit 2; }
done

cd "$root"
if [ ${#bins[@]} -eq 0 ]; then
    cargo build --release -q -p tern
    bins=("$root/target/release/tern")
fi
for bin in "${bins[@]}"; do
    [ -x "$bin" ] || { echo "quiet.sh: $bin is not an executable" >&2; exit 2; }
done
out=${out:-$root/target/quiet/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

load1() { cut -d' ' -f1 /proc/loadavg; }
# Busy jiffies of the whole machine (user nice system irq softirq steal), to tell how much CPU
# something other than the benchmark took while it ran: on this VM the two vCPUs share a
# physical core, so even a light load on the other vCPU can halve the measured rate.
busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
hz=$(getconf CLK_TCK)
quiet() { awk -v l="$(load1)" -v m="$max_load" 'BEGIN { exit !(l < m) }'; }

waited=0
until quiet; do
    if [ "$waited" -ge "$wait_s" ]; then
        echo "quiet.sh: load average $(load1) is not below $max_load after ${wait_s}s: not timing on a busy machine" >&2
        exit 3
    fi
    [ "$waited" = 0 ] && echo "waiting for load average < $max_load (now $(load1)) ..." >&2
    sleep 10
    waited=$((waited + 10))
done
before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
echo "load average before: $before" >&2

for r in $(seq 1 "$rounds"); do
    for c in "${cases[@]}"; do
      for b in "${!bins[@]}"; do
        bin=${bins[$b]}
        # One binary keeps the old file names; several get a .binN suffix.
        f=$c
        [ ${#bins[@]} -gt 1 ] && f=$c.bin$b
        args=$(table | awk -F'|' -v c="$c" '$1 == c { print $3 }')
        extra=()
        [ -n "$packets" ] && extra=(--packets "$packets")
        echo "round $r/$rounds: $c ($bin)" >&2
        b0=$(busy)
        # shellcheck disable=SC2086
        /usr/bin/time -f "%e %U %S" -o "$out/$f.round$r.time" "$bin" bench $args --runs 3 --latency-samples 0 --stage-packets 0 "${extra[@]}" \
            --json "$out/$f.round$r.json" >"$out/$f.round$r.txt" 2>&1 ||
            { echo "quiet.sh: $c failed with $bin, see $out/$f.round$r.txt" >&2; exit 1; }
        b1=$(busy)
        read -r el us sy <"$out/$f.round$r.time"
        awk -v d=$((b1 - b0)) -v hz="$hz" -v el="$el" -v us="$us" -v sy="$sy" \
            'BEGIN { printf "%.3f\n", (d / hz - us - sy) / el }' >"$out/$f.round$r.background"
      done
    done
done
after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out" "$rounds" "$before" "$after" "$started" "$(IFS='|'; echo "${bins[*]}")" "${cases[@]}" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
out, rounds, before, after, started, binaries, *cases = sys.argv[1:]
binaries = binaries.split("|")
names = ", ".join(f"`{b}`" + (f" (bin{i})" if len(binaries) > 1 else "") for i, b in enumerate(binaries))
print(f"Taken {started} with {names}; load average before {before}, after {after}; "
      f"{rounds} alternated rounds, each the median of 3 timed runs.\n")
print("Background: the CPU something other than the benchmark took while it ran, in CPUs "
      "(the largest of the rounds; above 0.05 the figure is suspect).\n")
multi = len(binaries) > 1
print("| case |" + (" binary | vs bin0 |" if multi else "") +
      " Mpps min | median | max | ns/packet (median) | cached GETs/s (median) | background |")
print("|---|" + ("---|---:|" if multi else "") + "---:|---:|---:|---:|---:|---:|")
for c in cases:
    base = None
    for i in range(len(binaries)):
        f = f"{c}.bin{i}" if multi else c
        runs = [json.load(open(f"{out}/{f}.round{r}.json")) for r in range(1, int(rounds) + 1)]
        mpps = sorted(x["mpps_median"] for x in runs)
        med = statistics.median(mpps)
        base = med if base is None else base
        gets = [x.get("cached_gets_mps_median") for x in runs]
        gets = f"{statistics.median(gets):.2f} M" if None not in gets else "–"
        bg = max(max(0.0, float(open(f"{out}/{f}.round{r}.background").read()))
                 for r in range(1, int(rounds) + 1))
        cols = f" bin{i} | {med / base:.2f}x |" if multi else ""
        print(f"| {c} |{cols} {mpps[0]:.2f} | {med:.2f} | {mpps[-1]:.2f} | {1000 / med:.0f} | {gets} | {bg:.2f} |")
PY
if ! quiet; then
    echo "quiet.sh: load average rose to $(load1) during the runs: treat the figures as suspect" >&2
fi
