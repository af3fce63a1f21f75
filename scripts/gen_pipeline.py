#!/usr/bin/env python3
"""Write a variant of p4/bench/pipeline20.p4 keeping only its first N exact tables (0..20),
for the Mpps-vs-pipeline-length plot: gen_pipeline.py N OUT.p4"""
import re
import sys

n, out = int(sys.argv[1]), sys.argv[2]
assert 0 <= n <= 20, "N must be 0..20"
src = open(__file__.rsplit("/", 2)[0] + "/p4/bench/pipeline20.p4").read()
for k in range(n, 20):
    src = re.sub(r"\n    action a%d\(bit<32> v\) \{.*?\n    \}" % k, "", src, flags=re.S)
    src = re.sub(r"\n    table t%02d \{.*?\n    \}" % k, "", src, flags=re.S)
    src = src.replace("\n            t%02d.apply();" % k, "")
src = src.replace("pipeline20.p4 — ", "pipeline%d.p4 (generated from pipeline20.p4) — " % n)
open(out, "w").write(src)
