#!/usr/bin/env python3
"""Per-function instructions per packet from two callgrind_annotate reports (N1 and N2
packets): cg_delta.py A.txt B.txt PACKETS self|inclusive"""
import re, sys
def load(p):
    out = {}
    for line in open(p):
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if m and ":" in m.group(2) and not m.group(2).startswith("=>"):
            out[m.group(2).strip()] = out.get(m.group(2).strip(), 0) + int(m.group(1).replace(",", ""))
    return out
a, b, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
rows = sorted(((b.get(k, 0) - a.get(k, 0)) / n, k) for k in b)
rows.reverse()
total = sum(r for r, _ in rows if r > 0)
kind = sys.argv[4]
if kind == "inclusive":
    total = max(r for r, _ in rows)
print(f"# {kind} instructions per packet by function (callgrind delta over {n} packets); total {total:.0f}")
for r, k in rows:
    if r >= 5:
        print(f"{r:8.0f}  {100 * r / total:5.1f}%  {k}")
