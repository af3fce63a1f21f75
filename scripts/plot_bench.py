#!/usr/bin/env python3
"""Plots from `tern bench` JSON (bench/run_scaling.sh): Mpps vs pipeline length and Mpps vs
workers. Usage: plot_bench.py DATA_DIR OUT_DIR"""
import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

data, out = sys.argv[1], sys.argv[2]


def load(pattern):
    rows = []
    for p in glob.glob(os.path.join(data, pattern)):
        with open(p) as f:
            rows.append((p, json.load(f)))
    return rows


# Mpps vs pipeline length (one thread).
pl = sorted(
    (int(os.path.basename(p).split("_")[1].split(".")[0]), j) for p, j in load("pipeline_*.json")
)
if pl:
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [n + 1 for n, _ in pl]  # exact tables + the LPM table
    ys = [j["mpps_median"] for _, j in pl]
    lo = [j["mpps_median"] - min(j["mpps"]) for _, j in pl]
    hi = [max(j["mpps"]) - j["mpps_median"] for _, j in pl]
    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label="tern, 1 thread (median, min-max)")
    ax.axhline(3.0, color="gray", ls="--", lw=1, label="issue 5 target for 20 tables (3 Mpps)")
    ins = {}
    for p, j in load("instr_pipeline_*.json"):
        ins[int(j["program"].split("_")[1]) + 1] = j["instr_per_packet"]
    if ins:
        ax2 = ax.twinx()
        xi = sorted(ins)
        ax2.plot(xi, [ins[x] for x in xi], color="tab:red", marker="^", ls="--",
                 label="instructions/packet (callgrind, exact)")
        ax2.set_ylabel("instructions per packet", color="tab:red")
        ax2.set_ylim(bottom=0)
        ax2.legend(fontsize=8, loc="center right")
    ax.set_xlabel("tables applied per packet (exact tables + 1 LPM)")
    ax.set_ylabel("Mpps (64-byte frames, in memory)")
    ax.set_title("tern bench: throughput vs pipeline length")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot_pipeline.png"), dpi=110)

# Mpps vs workers (l3_router).
wk = sorted((j["workers"], j) for _, j in load("workers_*.json"))
if wk:
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [w for w, _ in wk]
    ax.plot(xs, [j["baseline"]["mpps_median"] for _, j in wk], marker="o", label="aggregate (packets / wall time)")
    ax.plot(
        xs,
        [j["baseline"]["mpps_per_worker_cpu_median"] for _, j in wk],
        marker="s",
        label="per worker CPU-second (= per core)",
    )
    cpus = wk[0][1]["cpus"]
    ax.axvline(cpus, color="gray", ls=":", lw=1, label=f"CPUs of this machine ({cpus})")
    ax.set_xlabel("worker threads")
    ax.set_ylabel("Mpps (l3_router, 64-byte frames)")
    ax.set_xticks(xs)
    ax.set_ylim(bottom=0)
    ax.set_title("tern bench --workers N: L3 router")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plot_workers.png"), dpi=110)
print("plots written to", out)
