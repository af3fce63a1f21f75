"""Plots for `tern bcache experiment` reports (see scripts/bcache-plot.sh), by their `kind`:
e1 lines (ns/packet vs tables), e2 grouped bars (cases x modes), e3 bars (key and written bits
per case, the paper's key bits beside), e4 lines (insert latency or references scanned vs insert rate), e5 lines (invalidation
latency vs impacted entries),
e6 curves (hit ratio vs cache size per skew and policy), e7 timeline (hit ratio per window,
with and without the storm), e8 bars (hit ratio per stateful program, value vs symbolic), e9
bars (ns/packet per mode), e10 bars (hit ratio and entries per worker, 1-N workers). Error bars: min..max of the runs."""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = ["no cache", "miss", "hit"]


def med(s):
    return s["median"], s["median"] - s["min"], s["max"] - s["median"]


def e1(r, ax):
    xs = [row["tables"] for row in r["rows"]]
    for m in MODES:
        m3 = [med(row[m]) for row in r["rows"]]
        ax.errorbar(xs, [v[0] for v in m3], yerr=[[v[1] for v in m3], [v[2] for v in m3]],
                    marker="o", label=m, capsize=3)
    ax.set_xlabel("exact tables in the pipeline")
    ax.set_ylabel("ns / packet")
    ax.set_title("E1: cost vs pipeline length")


def e2(r, ax):
    rows = r["rows"]
    w = 0.27
    for i, m in enumerate(MODES):
        m3 = [med(row[m]) for row in rows]
        xs = [j + (i - 1) * w for j in range(len(rows))]
        ax.bar(xs, [v[0] for v in m3], w, yerr=[[v[1] for v in m3], [v[2] for v in m3]],
               label=m, capsize=3)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"case #{row['case']}" for row in rows])
    ax.set_ylabel("ns / packet")
    ax.set_title("E2: the paper's cases (paper, case #4 on BMv2: hit > 3x, miss <= 3.1 %)")


def e3(r, ax):
    rows = r["rows"]
    w = 0.27
    series = [("key_bits", "tern key bits"), ("written_bits", "tern written bits"),
              ("paper_key_bits", "paper key bits")]
    for i, (k, label) in enumerate(series):
        xs = [j + (i - 1) * w for j in range(len(rows))]
        ax.bar(xs, [row[k] for row in rows], w, label=label)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"case #{row['case']}" for row in rows])
    ax.set_ylabel("bits")
    ax.set_title("E3: what decides the behaviour, what it writes")


def e5(r, ax):
    by = {}
    for row in r["rows"]:
        by.setdefault(row["installed"], []).append(row)
    for total, rows in sorted(by.items()):
        m3 = [med(row["latency_us"]) for row in rows]
        ax.errorbar([row["impacted"] for row in rows], [v[0] for v in m3],
                    yerr=[[v[1] for v in m3], [v[2] for v in m3]], marker="o", capsize=3,
                    label=f"{total} cached")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("impacted entries")
    ax.set_ylabel("invalidation latency (us)")
    ax.set_title("E5: invalidation (paper: linear, < 0.2 s at 10K)")


def e6(r, axs):
    skews = sorted({row["skew"] for row in r["rows"]})
    for ax, s in zip(axs, skews):
        rows = [row for row in r["rows"] if row["skew"] == s]
        xs = [row["capacity"] for row in rows]
        ax.plot(xs, [100 * row["ideal"] for row in rows], "k--", label="ideal (top C)")
        for p in r["policies"]:
            ax.plot(xs, [100 * row[p] for row in rows], marker="o", label=p)
        ax.set_xscale("log")
        ax.set_ylim(0, 100)
        ax.set_xlabel("cache entries")
        ax.set_title(f"Zipf {s}")
        ax.grid(alpha=0.3)
    axs[0].set_ylabel(f"hit ratio (%), {r['flows']} flows")


def e7(r, ax):
    for row in r["rows"]:
        t = row["timeline"]
        label = ("10K updates/s" if row["storm"] else "no updates") + \
            f" ({row['mismatches']} mismatches)"
        ax.plot([p["packet"] for p in t], [100 * p["hit_ratio"] for p in t], marker=".",
                label=label)
    ax.set_xlabel("packets")
    ax.set_ylabel("hit ratio per window (%)")
    ax.set_ylim(0, 100)
    ax.set_title("E7: update storm, cached vs uncached in lock-step")


def e9(r, ax):
    rows = r["rows"]
    m3 = [med(row["ns_per_packet"]) for row in rows]
    ax.bar(range(len(rows)), [v[0] for v in m3], yerr=[[v[1] for v in m3], [v[2] for v in m3]],
           capsize=3)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([row["mode"] for row in rows])
    ax.set_ylabel("ns / packet")
    ax.set_title("E9: random headers, every packet a miss (paper: penalty <= 3.1 %)")


def e4(r, ax):
    rows = r["rows"]
    for t in dict.fromkeys(x["table"] for x in rows):
        pts = [x for x in rows if x["table"] == t]
        rates = [x["rate"] for x in pts]
        if r.get("timed"):
            m3 = [med(x["latency_us"]) for x in pts]
            ax.errorbar(rates, [v[0] for v in m3], yerr=[[v[1] for v in m3], [v[2] for v in m3]],
                        marker="o", capsize=3, label=f"{t}: latency (µs)")
            for x in pts:
                ax.scatter([x["rate"]] * len(x["latency_us"]["all"]), x["latency_us"]["all"],
                           s=2, alpha=0.2)
        else:
            ax.plot(rates, [x["scanned_per_insert"] for x in pts], marker="o",
                    label=f"{t}: references scanned / insert")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("inserts / s (virtual time, 1 Mpps)")
    ax.set_title("E4: insert cost vs insert rate (paper Fig. 10a: latency vs rate)")


def e8(r, ax):
    rows = r["rows"]
    progs = list(dict.fromkeys(row["program"] for row in rows))
    for k, mode in enumerate(["value", "symbolic"]):
        v = [next((x["hit_ratio"] for x in rows if x["program"] == p and x["mode"] == mode), 0)
             for p in progs]
        ax.bar([i + 0.38 * k for i in range(len(progs))], [100 * x for x in v], width=0.38,
               label=mode + (" (paper: register values in the key)" if mode == "value" else ""))
    ax.set_xticks([i + 0.19 for i in range(len(progs))])
    ax.set_xticklabels(progs)
    ax.set_ylabel("hit ratio (%)")
    ax.set_title("E8: stateful programs, value-keyed vs guarded/symbolic (harness: 0 differences)")


def e10(r, ax):
    xs, hr, ent = [], [], []
    for row in r["rows"]:
        for w in row["per_worker"]:
            xs.append(f"{row['workers']}w/{w['worker']}")
            hr.append(100 * w["hit_ratio"])
            ent.append(w["entries"])
    ax.bar(range(len(xs)), hr, label="hit ratio (%)")
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels(xs, rotation=60, fontsize=7)
    ax.set_ylabel("hit ratio (%)")
    ax2 = ax.twinx()
    ax2.plot(range(len(xs)), ent, "o-", color="C1", label="entries")
    ax2.set_ylabel("cache entries")
    ax.set_title("E10: per-worker caches (workers/worker), case #4, flow-hash spread")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("report")
    a = ap.parse_args()
    with open(a.report) as f:
        r = json.load(f)
    kind = r["kind"]
    if kind == "e6":
        n = len({row["skew"] for row in r["rows"]})
        fig, axs = plt.subplots(1, n, figsize=(4 * n, 4), sharey=True)
        axs = list(axs) if n > 1 else [axs]
        e6(r, axs)
        axs[-1].legend(fontsize=8)
    else:
        fig, ax = plt.subplots(figsize=(8, 4.6))
        {"e1": e1, "e2": e2, "e3": e3, "e4": e4, "e5": e5, "e7": e7, "e8": e8, "e9": e9,
         "e10": e10}[kind](r, ax)
        ax.grid(alpha=0.3)
        if kind != "e9":
            ax.legend(fontsize=8)
    build = r.get("build", "?")
    fig.suptitle(f"{r.get('command', '')} ({build} build{', quick' if r.get('quick') else ''})",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
