#!/usr/bin/env bash
# Instructions per packet of a whole `tern run` on pcap files (the L3 router, traffic from
# bench/gen_l3_pcap.py, five file ports), split into read / switch / write / driver: callgrind's
# delta of N2 and N1 packets (loading, compiling, installing routes and opening files cancel
# out), inclusive costs of the run loop's entry points from `callgrind_annotate
# --inclusive=yes`, and the whole program's delta (which also counts the final flush).
# Usage (repository root): bench/callgrind_run.sh [TERN...]   (default target/release/tern;
# several binaries are measured one after the other on the same traffic, e.g. the previous
# commit's and this one's; N1/N2 packets, default 50,000 / 150,000; EXTRA="--deterministic"
# adds `tern run` options; the per-function delta profiles go to $D/run_{self,inclusive}_K.txt
# for the K-th binary, D=bench/data by default)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] && set -- target/release/tern
N1=${N1:-50000}
N2=${N2:-150000}
D=${D:-bench/data}
P=$PWD/p4/bench/l3_router.p4
mkdir -p "$D"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $N1 $N2; do
    mkdir -p "$tmp/in.$n"
    python3 bench/gen_l3_pcap.py "$tmp/in.$n" "$n" >/dev/null
done
k=0
for T in "$@"; do
    k=$((k + 1))
    T=$(cd "$(dirname "$T")" && pwd)/$(basename "$T")
    for n in $N1 $N2; do
        w="$tmp/run.$k.$n"
        cp -r "$tmp/in.$n" "$w"
        (cd "$w" && valgrind --tool=callgrind --callgrind-out-file="$tmp/t.$k.$n.cg" \
            "$T" run "$P" --use-files 0 -i 0@p0 -i 1@p1 -i 2@p2 -i 3@p3 -i 4@p4 \
            --commands routes.txt ${EXTRA:-} >/dev/null 2>&1)
        callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$tmp/t.$k.$n.cg" >"$tmp/t.$k.$n.inc" 2>/dev/null
        callgrind_annotate --auto=no --threshold=100 "$tmp/t.$k.$n.cg" >"$tmp/t.$k.$n.self" 2>/dev/null
        rm -rf "$w"
    done
    strip() { sed -e "s#$PWD/##g" -e "s#\[$T\]#[tern]#g"; }
    python3 scripts/cg_delta.py "$tmp/t.$k.$N1.self" "$tmp/t.$k.$N2.self" $((N2 - N1)) self | strip >"$D/run_self_$k.txt"
    python3 scripts/cg_delta.py "$tmp/t.$k.$N1.inc" "$tmp/t.$k.$N2.inc" $((N2 - N1)) inclusive | strip >"$D/run_inclusive_$k.txt"
    echo "## $k: $T"
    python3 - "$tmp/t.$k.$N1.inc" "$tmp/t.$k.$N2.inc" "$tmp/t.$k.$N1.cg" "$tmp/t.$k.$N2.cg" $((N2 - N1)) \
        "$tmp/t.$k.$N1.self" "$tmp/t.$k.$N2.self" <<'EOF'
import re, sys
def load(p):
    out = {}
    for line in open(p):
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if m and ":" in m.group(2) and not m.group(2).startswith("=>"):
            k = m.group(2).strip()
            out[k] = out.get(k, 0) + int(m.group(1).replace(",", ""))
    return out
def total(p):
    for line in open(p):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    return 0
a, b, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[5])
sa, sb = load(sys.argv[6]), load(sys.argv[7])
def per(*pats, a=a, b=b):
    # The largest matching entry (a function's own line in the inclusive report).
    vals = [(b[k] - a.get(k, 0)) / n for k in b for p in pats if re.search(p, k)]
    return max(vals, default=0.0)
whole = (total(sys.argv[4]) - total(sys.argv[3])) / n
loop = per(r"cmd_run::replay\b")
# `try_recv` calls `recv` (counted in recv's inclusive cost): only its own cost is added.
# Mapped inputs are read by `recv_held` (records parsed in place; the frames' bytes are read
# by the switch itself, no copy).
read = (per(r"PortIo>::recv\b") + per(r"PortIo>::try_recv\b", a=sa, b=sb)
        + per(r"PortIo>::recv_held\b", r"HeldReader::recv_held\b"))
# With the batch inlined into the run loop (`process_batch_ends`), the lane is what is left.
switch = per(r"Switch::process_batch\b", r"Switch::process_batch_ends\b", r"Switch>::process_lane\b",
             r"Switch::process_packet\b", r"Switch::process_at\b", r"Switch>?::process_burst",
             r"Switch>::lane_burst\b")
# The output sink (`replay_mapped`, since h-io3) is inlined into the loop: only the record
# writer itself (`write_packet`, header and copy) is a function of its own there.
write = max(per(r"run_workers::send_output\b", r"PortIo>::send\b") + per(r"PortIo>::send_all\b"),
            per(r"PcapFileWriter<W>::write_packet\b") + per(r"PcapFileWriter<W>::commit_in_place\b"))
rows = [
    ("whole program (delta of the two runs)", whole),
    ("run loop (`replay`)", loop),
    ("read (`FilePorts` receive or recv_held: pcap decode, merge)", read),
    ("switch (`process_lane` or `process_at`: the packets' own work)", switch),
    ("write (outputs: pcap records into the buffers; sink: `write_packet` only)", write),
    ("driver (`replay` minus read, switch, write)", loop - read - switch - write),
    ("outside the loop (flushes at exit: whole minus loop)", whole - loop),
]
print("| part | instructions/packet |\n|---|---:|")
for name, v in rows:
    print(f"| {name} | {v:,.0f} |")
EOF
done
