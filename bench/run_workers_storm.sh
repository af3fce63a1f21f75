#!/bin/bash
# tern run --workers under a Thrift update storm, on the traffic of bench/gen_l3_pcap.py:
#   bench/gen_l3_pcap.py DIR 1000000
#   bench/run_workers_storm.sh target/release/tern DIR WORKERS STORM
# Replays DIR/p0_in.pcap through p4/bench/l3_router.p4 with --use-files 2 and a Thrift server.
# STORM=1: 1.9 s after the server is up (just before the replay starts), `tern cli` sends
# 20,000 table_modify commands flipping each route's next-hop MAC between 02:aa:.. and
# 02:bb:.. (same port). Prints the run summary, the CLI's duration and the output check
# (bench/check_l3_outputs.py: every frame on its route's port with one of the two MACs).
set -e
T=$(realpath "$1"); DIR=$2; W=$3; S=$4
REPO=$(cd "$(dirname "$0")/.." && pwd)
P=$((20000 + RANDOM % 20000))
cd "$DIR"
python3 - <<'PY'
with open("storm.txt", "w") as f:
    for i in range(20000):
        r = i % 16
        mac = "bb" if (i // 16) % 2 == 0 else "aa"
        f.write(f"table_modify RIngress.ipv4_lpm RIngress.set_nhop {r} "
                f"02:{mac}:00:00:00:{r:02x} {1 + r % 4}\n")
PY
rm -f p*_out.pcap run.err
"$T" run "$REPO/p4/bench/l3_router.p4" --use-files 2 -i 0@p0 -i 1@p1 -i 2@p2 -i 3@p3 -i 4@p4 \
  --commands routes.txt --workers "$W" --thrift-port $P > /dev/null 2> run.err &
RUN=$!
until (exec 3<>/dev/tcp/127.0.0.1/$P) 2>/dev/null; do sleep 0.05; done
if [ "$S" = 1 ]; then
  sleep 1.9
  ( s=$(date +%s.%N); "$T" cli --thrift-port $P --commands storm.txt > cli.out 2>&1
    e=$(date +%s.%N); echo "cli: $(wc -l < cli.out) replies, $(echo "$e - $s" | bc) s" ) &
  CLI=$!
fi
until grep -q "packets in" run.err; do sleep 0.1; done
sleep 0.5; kill $RUN; wait $RUN 2>/dev/null || true
if [ "$S" = 1 ]; then wait $CLI; fi
grep "tern run:" run.err | grep -v "still running"
python3 "$REPO/bench/check_l3_outputs.py"
