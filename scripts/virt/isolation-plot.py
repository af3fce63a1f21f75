#!/usr/bin/env python3
"""Plot `tern virt bench --isolation`: DIR/isolation.json -> DIR/isolation.png. Per worker
count, the open-loop victim's p99 latency alone and under each attack (the 5 % target band
around alone drawn), and its delivered rate over its offered rate. Usage: isolation-plot.py DIR"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

d = sys.argv[1]
rep = json.load(open(os.path.join(d, "isolation.json")))
rows = rep["rows"]
workers = sorted({r["workers"] for r in rows})
fig, axes = plt.subplots(len(workers), 2, figsize=(13, 4.2 * len(workers)), squeeze=False)
for i, w in enumerate(workers):
    rs = [r for r in rows if r["workers"] == w]
    names = [r["attack"] for r in rs]
    xs = range(len(rs))
    alone = rs[0]
    ax = axes[i][0]
    p99 = [r["p99_ns"] / 1e3 for r in rs]
    # Within the target: p99 at most 5 % over the row's own alone runs (lower is no breach).
    colors = ["tab:green" if r["p99_vs_alone_pct"] <= 5 else "tab:red" for r in rs]
    colors[0] = "tab:blue"
    ax.bar(xs, p99, color=colors)
    base = alone["p99_ns"] / 1e3
    ax.axhspan(base * 0.95, base * 1.05, color="tab:blue", alpha=0.15, label="suite alone ±5 %")
    paired = [(x, r["alone_paired"]["p99_ns"] / 1e3) for x, r in zip(xs, rs)
              if r.get("alone_paired", {}).get("runs")]
    if paired:
        ax.scatter([x for x, _ in paired], [v * 1.05 for _, v in paired], marker="_", s=400,
                   color="k", zorder=3, label="the row's own alone + 5 %")
    ax.set_yscale("log")
    ax.set_ylabel("victim p99 latency (µs, log)")
    ax.set_title("%d worker(s): victim p99, offered %.0f kpps (%.0f %% of capacity)"
                 % (w, alone["target_pps"] / 1e3, 100 * rep["victim_share"]))
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.legend(fontsize=8)
    ax = axes[i][1]
    ratio = [r["delivered_vs_offered"] for r in rs]
    ax.bar(xs, ratio, color=["tab:blue"] + ["tab:green" if r["rate_vs_alone_pct"] >= -5
                                            else "tab:red" for r in rs[1:]])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylim(0, max(1.1, max(ratio) * 1.05))
    ax.set_ylabel("delivered / offered")
    ax.set_title("%d worker(s): victim rate delivered / offered (loss in label)" % w)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(["%s\n(loss %.2f %%)" % (n, r["loss_pct"]) for n, r in zip(names, rs)],
                       rotation=30, ha="right", fontsize=7)
fig.tight_layout()
out = os.path.join(d, "isolation.png")
fig.savefig(out, dpi=100)
print("wrote", out)
