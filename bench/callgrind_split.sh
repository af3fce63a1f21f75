#!/usr/bin/env bash
# Where a packet's instructions go, by part (parser / ingress / egress / deparse + checksum /
# driver), and the hand-written ceiling counted the same way: callgrind's delta of N2 and N1
# packets (loading, compiling and installing cancel out), inclusive costs of the engine's
# entry points, from `callgrind_annotate --inclusive=yes`.
# Usage (repository root): bench/callgrind_split.sh [PROGRAM.p4]   (T=tern binary, default
# target/release/tern; CEILING=1 also counts ../shared/bench/ceiling_l3.c built with cc -O2;
# the per-function delta profiles, self and inclusive, go to $D/split_{self,inclusive}.txt,
# D=bench/data by default)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${T:-target/release/tern}
P=${1:-p4/bench/l3_router.p4}
N1=${N1:-100000}
N2=${N2:-300000}
D=${D:-bench/data}
mkdir -p "$D"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $N1 $N2; do
    valgrind --tool=callgrind --callgrind-out-file="$tmp/t.$n.cg" \
        "$T" bench "$P" --packets "$n" --runs 1 --latency-samples 0 --stage-packets 0 >/dev/null 2>&1
    callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$tmp/t.$n.cg" >"$tmp/t.$n.inc" 2>/dev/null
    callgrind_annotate --auto=no --threshold=100 "$tmp/t.$n.cg" >"$tmp/t.$n.self" 2>/dev/null
done
# Paths of this machine (checkout, binary) left out of the saved profiles.
strip() { sed -e "s#$PWD/##g" -e "s#\[$T\]#[tern]#g"; }
python3 scripts/cg_delta.py "$tmp/t.$N1.self" "$tmp/t.$N2.self" $((N2 - N1)) self | strip >"$D/split_self.txt"
python3 scripts/cg_delta.py "$tmp/t.$N1.inc" "$tmp/t.$N2.inc" $((N2 - N1)) inclusive | strip >"$D/split_inclusive.txt"
python3 - "$tmp/t.$N1.inc" "$tmp/t.$N2.inc" "$tmp/t.$N1.self" "$tmp/t.$N2.self" $((N2 - N1)) <<'EOF'
import re, sys
def load(p):
    out = {}
    for line in open(p):
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if m and ":" in m.group(2) and not m.group(2).startswith("=>"):
            k = m.group(2).strip()
            out[k] = out.get(k, 0) + int(m.group(1).replace(",", ""))
    return out
ia, ib, sa, sb, n = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3]), load(sys.argv[4]), int(sys.argv[5])
def per(a, b, pat):
    # Largest matching entry (the function's own line in the inclusive report).
    ks = [k for k in b if re.search(pat, k)]
    return max(((b[k] - a.get(k, 0)) / n for k in ks), default=0.0)
def self_sum(pat):
    return sum((sb[k] - sa.get(k, 0)) / n for k in sb if re.search(pat, k))
total = per(ia, ib, r"cmd_bench::run_single\b")
batch = max(per(ia, ib, r"Switch::process_batch\b"), per(ia, ib, r"Switch::process_at\b"),
            per(ia, ib, r"Switch::process_one\b"), per(ia, ib, r"Switch>?::process_burst"))
parse = per(ia, ib, r"Flow::parse_and_verify\b")
pipe = per(ia, ib, r"Engine>::run_pipeline\b")
deparse = per(ia, ib, r"Engine>::deparse\b")
csum = self_sum(r"csum\.rs:")
rows = [
    ("whole timed loop (`run_single`)", total),
    ("the switch (`process_batch` / `process_burst` / `process_at` / `process_one`)", batch),
    ("parser (`parse_and_verify`: native parse, standard metadata)", parse),
    ("ingress + egress pipelines (`run_pipeline`, both calls)", pipe),
    ("deparse (`Engine::deparse`: emit, checksum, payload)", deparse),
    ("  of which checksum code (`csum.rs`, self)", csum),
    ("switch driver (`process_batch` minus parse, pipelines, deparse)", batch - parse - pipe - deparse),
    ("bench driver (loop, output recycling; `run_single` minus `process_batch`)", total - batch),
]
print(f"| part | instructions/packet |\n|---|---:|")
for name, v in rows:
    print(f"| {name} | {v:,.0f} |")
EOF
if [ -n "${CEILING:-}" ]; then
    cc -O2 -o "$tmp/ceiling_l3" ../shared/bench/ceiling_l3.c
    for n in 1000000 3000000; do
        valgrind --tool=callgrind --callgrind-out-file="$tmp/c.$n.cg" "$tmp/ceiling_l3" 1000 1024 "$n" 1 >/dev/null 2>&1
    done
    a=$(grep -E '^(summary|totals):' "$tmp/c.1000000.cg" | head -1 | awk '{print $2}')
    b=$(grep -E '^(summary|totals):' "$tmp/c.3000000.cg" | head -1 | awk '{print $2}')
    echo "| ceiling_l3.c (cc -O2), whole loop | $(( (b - a) / 2000000 )) |"
fi
