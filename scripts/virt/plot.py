#!/usr/bin/env python3
"""Plot `tern virt bench` output: DIR/virt_bench.json (and DIR/veth.json when present) ->
DIR/virt_bench.png. Tables per packet and table entries, HyPer4 (native program, persona)
beside tern (native, sliced); with timed data, HyPer4's bandwidth penalty beside tern's
in-memory rate penalty and the ping-flood time ratio on veth. Usage: plot.py DIR"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

d = sys.argv[1]
rows = json.load(open(os.path.join(d, "virt_bench.json")))["rows"]
veth_path = os.path.join(d, "veth.json")
veth = json.load(open(veth_path)) if os.path.exists(veth_path) else None
timed = any("timed" in r["tern"] for r in rows)

panels = 2 + (1 if timed or veth else 0)
fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5))


def bars(ax, title, series, names):
    w = 0.8 / len(series)
    for i, (label, vals) in enumerate(series):
        xs = [k + i * w for k in range(len(names))]
        ax.bar(xs, [v if v is not None else 0 for v in vals], w, label=label)
    ax.set_xticks([k + 0.4 - w / 2 for k in range(len(names))])
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_title(title)
    ax.legend(fontsize=8)


names = [r["row"] for r in rows]
h = [r["hyper4"] for r in rows]
t = [r["tern"] for r in rows]
bars(
    axes[0],
    "tables applied per packet",
    [
        ("HyPer4 native", [x["tables_native"] for x in h]),
        ("HyPer4 persona", [x["tables_persona"] for x in h]),
        ("tern native", [x["tables_native"] for x in t]),
        ("tern sliced (+classifier, +hops)", [x["tables_sliced"] for x in t]),
    ],
    names,
)
bars(
    axes[1],
    "table entries (tern sliced: + rules + links)",
    [
        ("HyPer4 native", [x["entries_native"] for x in h]),
        ("HyPer4 persona", [x["entries_persona"] for x in h]),
        ("tern native", [x["entries_native"] for x in t]),
        ("tern sliced", [x["entries_sliced"] + x["classifier_rules"] + x["links"] for x in t]),
    ],
    names,
)
if panels == 3:
    ax = axes[2]
    series = [("HyPer4 bandwidth loss %", [x["bandwidth_loss_pct"] for x in h])]
    if timed:
        series.append(
            ("tern sliced rate loss % (memory)", [x.get("timed", {}).get("rate_loss_pct") for x in t])
        )
    bars(ax, "penalty vs native (%)", series, names)
fig.tight_layout()
out = os.path.join(d, "virt_bench.png")
fig.savefig(out, dpi=110)
print("wrote", out)
