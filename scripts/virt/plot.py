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

panels = 2 + (1 if timed or veth else 0) + (1 if veth else 0)
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
if panels >= 3 and timed:
    ax = axes[2]
    series = [("HyPer4 bandwidth loss %", [x["bandwidth_loss_pct"] for x in h])]
    if timed:
        series.append(
            ("tern sliced rate loss % (memory)", [x.get("timed", {}).get("rate_loss_pct") for x in t])
        )
    bars(ax, "penalty vs native (%)", series, names)
if veth:
    # veth rows are per function; the table's rows map onto them.
    fn_of = {"L2 switch": "l2", "firewall": "firewall", "router": "router",
             "ARP proxy (answered)": "arp_proxy", "Ex. 1 B (L2 - FW - L2)": "ex1_B",
             "Ex. 1 C (L2 - [ARP -> FW -> R] - L2)": "ex1_C"}
    by = {(v["function"], v["mode"]): v for v in veth}

    def med(v):
        v = sorted(x for x in v if x is not None)
        return v[len(v) // 2] if v else None

    def ratio(fn, mode, base="native"):
        a, b = by.get((fn, mode)), by.get((fn, base))
        if not a or not b:
            return None
        x, y = med(a["ping_flood_ms"]), med(b["ping_flood_ms"])
        return x / y if x and y else None

    vnames = [n for n in names if n in fn_of]
    series = [
        ("HyPer4 persona / native", [x["ping_flood_factor"] for x, n in zip(h, names) if n in fn_of]),
        ("tern sliced / native", [ratio(fn_of[n], "sliced") for n in vnames]),
    ]
    if any((fn_of[n], "bmv2") in by for n in vnames):
        series.append(("BMv2 / tern native", [ratio(fn_of[n], "bmv2") for n in vnames]))
    # The veth loss in the penalty panel too.
    bars(axes[-1], "ping -f time ratio on veth (x)", series, vnames)
    if panels == 4 and not timed:
        bw = [None] * len(names)
        for i, n in enumerate(names):
            if n in fn_of:
                a, b = by.get((fn_of[n], "sliced")), by.get((fn_of[n], "native"))
                if a and b and a["iperf3_mbit_s"] and b["iperf3_mbit_s"]:
                    bw[i] = 100 * (1 - a["iperf3_mbit_s"] / b["iperf3_mbit_s"])
        bars(axes[2], "penalty vs native (%)",
             [("HyPer4 bandwidth loss %", [x["bandwidth_loss_pct"] for x in h]),
              ("tern sliced bandwidth loss % (veth)", bw)], names)
fig.tight_layout()
out = os.path.join(d, "virt_bench.png")
fig.savefig(out, dpi=110)
print("wrote", out)
