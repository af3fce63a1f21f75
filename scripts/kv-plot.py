"""Plots for tern kv reports (see scripts/kv-plot.sh).

Kinds, told apart by their fields:
* bench report (`timeline_100ms`): throughput over time, latency CDF, per-server load;
* rotation report (`per_server_rate`): per emulated server request rate and request share;
* experiment summary (`kind` = "nocache-summary"): throughput per workload, scalability,
  latency against offered load, throughput over time under dynamic popularity;
* paper experiment (`kind` = "kv-paper-experiment", `tern kv experiment exp1`…`exp10`): the
  FarReach paper's figure form — grouped bars or lines per method with 95 % CI error bars,
  per-second throughput (exp7), stacked recovery phases (exp9), a resource table (exp10);
* MADINC experiment (`kind` = "kv-madinc-experiment", `tern kv experiment madinc-…`): tern's
  points as grouped bars per series beside the thesis's figures, and the modelled RTT CDF of
  madinc-distribution.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rates(fine, seconds):
    """ops/s per 100 ms bin; the last, partial bin is scaled by its real length."""
    out = [v * 10.0 for v in fine]
    if out and seconds:
        last = seconds - 0.1 * (len(out) - 1)
        if 0.005 < last < 0.1:
            out[-1] = fine[-1] / last
    return out


def bench(r, title):
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.6))
    fine = rates(r.get("timeline_100ms") or [], r.get("seconds"))
    xs = [i / 10 + 0.05 for i in range(len(fine))]
    ax[0].plot(xs, [v / 1000 for v in fine], marker=".", markersize=4)
    ax[0].set_xlabel("time (s)")
    ax[0].set_ylabel("throughput (kops/s, per 100 ms)")
    ax[0].set_title("throughput over time")
    ax[0].set_ylim(bottom=0)
    ax[0].grid(alpha=0.3)
    cdf = r.get("latency_cdf") or []
    if cdf:
        ax[1].plot([p[1] for p in cdf], [p[0] for p in cdf], marker=".", markersize=3)
        ax[1].set_xscale("log")
    lat = r.get("latency", {})
    ax[1].set_xlabel("latency (µs, log)")
    ax[1].set_ylabel("fraction of operations")
    ax[1].set_title(
        "latency CDF: p50 %s µs, p99 %s µs, p99.9 %s µs"
        % (lat.get("p50_us"), lat.get("p99_us"), lat.get("p999_us")),
        fontsize=10,
    )
    ax[1].grid(alpha=0.3, which="both")
    per = r.get("per_server") or []
    ax[2].bar(range(len(per)), [s["share"] * 100 for s in per])
    if per:
        ax[2].axhline(100 / len(per), color="gray", linestyle="--", label="mean")
        ax[2].legend()
    if len(per) <= 32:
        ax[2].set_xticks(range(len(per)))
    ax[2].set_xlabel("server")
    ax[2].set_ylabel("share of requests (%)")
    ax[2].set_title("per-server load (imbalance max/mean %.2f)" % r.get("imbalance", 0))
    mode = "open loop %.0f ops/s" % r["target_rate"] if r.get("target_rate") else "closed loop"
    dyn = r.get("dynamic")
    extra = ", dynamic %s every %s s" % (dyn["pattern"], dyn["period_s"]) if dyn else ""
    fig.suptitle(
        "%s — workload %s, %s servers, %s threads, %s%s:\n%.0f ops/s, %d errors"
        % (title, r["workload"], r["servers"], r["threads"], mode, extra, r["throughput"], r["errors"])
    )
    return fig


def rotation(r, title):
    fig, ax = plt.subplots(figsize=(max(8, r["servers"] * 0.12 + 4), 4.5))
    n = r["servers"]
    rates = [v / 1000 for v in r["per_server_rate"]]
    colors = ["tab:red" if i == r["bottleneck"] else "tab:blue" for i in range(n)]
    ax.bar(range(n), rates, color=colors)
    ax.set_xlabel("emulated server (red: bottleneck)")
    ax.set_ylabel("request rate (k requests/s, rescaled)")
    ax2 = ax.twinx()
    ax2.plot(range(n), [s * 100 for s in r["shares"]], color="black", marker=".", linewidth=0.8)
    ax2.set_ylabel("share of requests (%)")
    ax2.set_ylim(bottom=0)
    ax.set_title(
        "%s — server rotation, workload %s, %d emulated servers\naggregate %.0f requests/s, "
        "normalized %.2f, imbalance max/min %.2f" % (title, r["workload"], n, r["aggregate_rate"], r["normalized"], r["imbalance"]),
        fontsize=10,
    )
    return fig


def summary(s, title):
    fig, ax = plt.subplots(2, 2, figsize=(14, 9))
    w = s["workloads"]
    xs = range(len(w))
    ax[0][0].bar([x - 0.2 for x in xs], [v[1] / 1000 for v in w], width=0.4, label="2 servers (ops/s)")
    ax[0][0].bar([x + 0.2 for x in xs], [v[2] / 1000 for v in w], width=0.4, label="16 emulated (requests/s)")
    ax[0][0].set_xticks(list(xs))
    ax[0][0].set_xticklabels([v[0] for v in w])
    ax[0][0].set_ylabel("k per second")
    ax[0][0].set_title("NoCache throughput per YCSB workload")
    ax[0][0].legend()
    sc = s["scalability"]
    ax[0][1].plot([v[0] for v in sc], [v[1] / 1000 for v in sc], marker="o", label="aggregate (k requests/s)")
    ax[0][1].set_xscale("log", base=2)
    ax[0][1].set_xticks([v[0] for v in sc])
    ax[0][1].set_xticklabels([str(v[0]) for v in sc])
    ax[0][1].set_xlabel("emulated servers (rotation)")
    ax[0][1].set_ylabel("k requests/s")
    axn = ax[0][1].twinx()
    axn.plot([v[0] for v in sc], [v[2] for v in sc], marker="s", color="tab:orange", label="normalized")
    axn.set_ylabel("normalized throughput (of N)")
    ax[0][1].set_title("scalability, workload A")
    ax[0][1].legend(loc="upper left")
    axn.legend(loc="upper right")
    lc = s["latency_curve"]
    ax[1][0].plot([v[1] / 1000 for v in lc], [v[2] / 1000 for v in lc], marker="o", label="mean")
    ax[1][0].plot([v[1] / 1000 for v in lc], [v[3] / 1000 for v in lc], marker="^", label="p50")
    ax[1][0].plot([v[1] / 1000 for v in lc], [v[4] / 1000 for v in lc], marker="s", label="p99")
    for v in lc:
        ax[1][0].annotate("target %.1fk" % (v[0] / 1000), (v[1] / 1000, v[4] / 1000), fontsize=7)
    ax[1][0].set_yscale("log")
    ax[1][0].set_xlabel("achieved throughput (k ops/s, open loop)")
    ax[1][0].set_ylabel("latency (ms, log)")
    ax[1][0].set_title("latency against offered load, workload A")
    ax[1][0].legend()
    ax[1][0].grid(alpha=0.3)
    for name, fine in s["dynamic"]:
        ys = rates(fine, None)[:-1]  # the last bin is partial
        ax[1][1].plot([i / 10 + 0.05 for i in range(len(ys))], [v / 1000 for v in ys], label=name, linewidth=1)
    ax[1][1].set_xlabel("time (s)")
    ax[1][1].set_ylabel("k ops/s (per 100 ms)")
    ax[1][1].set_title("write-only under dynamic popularity (2 servers)")
    ax[1][1].set_ylim(bottom=0)
    ax[1][1].legend()
    fig.suptitle("%s — %s\n%s" % (title, s["date"], s["machine"]), fontsize=9)
    return fig


METHODS = ["nocache", "netcache", "farreach"]
COLORS = {"nocache": "tab:gray", "netcache": "tab:blue", "farreach": "tab:red"}
LABELS = {"nocache": "NoCache", "netcache": "NetCache", "farreach": "FarReach"}


def xs_of(r):
    xs = []
    for p in r["points"]:
        if p["x"] not in xs:
            xs.append(p["x"])
    return xs


def point(r, x, m):
    for p in r["points"]:
        if p["x"] == x and p["method"] == m:
            return p
    return None


def paper_bars(r, ax):
    xs = xs_of(r)
    ms = [m for m in METHODS if any(p["method"] == m for p in r["points"])]
    w = 0.8 / max(1, len(ms))
    for j, m in enumerate(ms):
        ps = [point(r, x, m) for x in xs]
        ax.bar([i + (j - (len(ms) - 1) / 2) * w for i in range(len(xs))],
               [p["mean"] / 1000 if p else 0 for p in ps], width=w,
               yerr=[p["ci95"] / 1000 if p else 0 for p in ps], capsize=3,
               color=COLORS[m], label=LABELS[m])
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels(xs)
    ax.set_ylabel("k " + r["metric"])


def paper_lines(r, ax, scale=1000.0, unit="k "):
    xs = xs_of(r)
    for m in METHODS:
        pts = [(x, point(r, x, m)) for x in xs if point(r, x, m)]
        if not pts:
            continue
        ax.errorbar([float(x) for x, _ in pts], [p["mean"] / scale for _, p in pts],
                    yerr=[p["ci95"] / scale for _, p in pts], marker="o", capsize=3,
                    color=COLORS[m], label=LABELS[m])
    ax.set_ylabel(unit + r["metric"])


def paper(r):
    kind = r["plot"]
    title = "%s (%s): %s" % (r["experiment"], r["figure"], r["title"])
    if kind == "timeline":
        pats = xs_of(r)
        fig, axs = plt.subplots(1, len(pats) + 1, figsize=(4 * (len(pats) + 1), 4))
        for ax, x in zip(axs, pats):
            for m in METHODS:
                p = point(r, x, m)
                if not p or not p["extra"]:
                    continue
                e = p["extra"][0]
                series = e.get("per_second") or []
                step = 1.0
                if len(series) < 3:
                    series, step = rates(e.get("per_100ms") or [], e.get("seconds")), 0.1
                else:
                    series = series[:-1] or series  # the last second is partial
                ax.plot([i * step for i in range(len(series))], [v / 1000 for v in series],
                        color=COLORS[m], label=LABELS[m])
            ax.set_title(x)
            ax.set_xlabel("time (s)")
            ax.set_ylabel("k ops/s")
            ax.set_ylim(bottom=0)
            ax.legend(fontsize=8)
        paper_bars(r, axs[-1])
        axs[-1].set_title("average throughput")
        axs[-1].legend(fontsize=8)
    elif kind == "stacked":
        fig, ax = plt.subplots(figsize=(9, 4.5))
        xs = xs_of(r)
        ms = [m for m in METHODS if any(p["method"] == m for p in r["points"])]
        w = 0.8 / max(1, len(ms))
        phases = [("collect_s", "collect"), ("preprocess_s", "preprocess"),
                  ("server_s", "server replay"), ("switch_s", "switch recovery")]
        hatches = {"nocache": "", "netcache": "//", "farreach": "xx"}
        for j, m in enumerate(ms):
            bottom = [0.0] * len(xs)
            for k, (key, label) in enumerate(phases):
                vals = []
                for x in xs:
                    p = point(r, x, m)
                    ex = p["extra"] if p else []
                    vals.append(sum(e.get(key, 0) for e in ex) / max(1, len(ex)))
                ax.bar([i + (j - (len(ms) - 1) / 2) * w for i in range(len(xs))], vals, width=w,
                       bottom=bottom, color="C%d" % k, hatch=hatches[m], edgecolor="black",
                       label=label if j == len(ms) - 1 else None)
                bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs)
        ax.set_ylabel("seconds")
        ax.set_title("hatching: none NoCache, // NetCache, xx FarReach", fontsize=9)
        ax.legend(fontsize=8)
    elif kind == "table":
        fig, ax = plt.subplots(figsize=(11, 2.5))
        ax.axis("off")
        cols = ["tables", "entries_installed", "register_arrays", "register_bytes", "actions",
                "instructions_per_packet"]
        rows = [[str(p["extra"].get(c)) for c in cols] + [str(p["extra"]["probe"].get("rss_load_kib"))]
                for p in r["points"]]
        ax.table(cellText=rows, rowLabels=[LABELS[p["method"]] for p in r["points"]],
                 colLabels=cols + ["RSS KiB"], loc="center")
    else:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        if kind == "lines":
            if r["experiment"] == "exp2":
                paper_lines(r, ax, 1.0, "")
            else:
                paper_lines(r, ax)
            if r["experiment"] == "exp3":
                ax.set_xscale("log", base=2)
        else:
            paper_bars(r, ax)
        ax.legend()
        ax.grid(alpha=0.3)
    if kind != "table":
        for a in fig.axes:
            if not a.get_xlabel():
                a.set_xlabel(r["x_label"])
    fig.suptitle("%s\n%s" % (title, r["note"]), fontsize=9)
    return fig


def madinc(r):
    xs = xs_of(r)
    series = []
    for p in r["points"]:
        if p["method"] not in series:
            series.append(p["method"])
    cdf = [p for p in r["points"] if isinstance(p.get("extra"), dict) and "rtt_cdf_ms" in p["extra"]]
    panels = 3 if cdf else 2
    fig, axs = plt.subplots(1, panels, figsize=(6 * panels, 4.5))
    w = 0.8 / max(1, len(series))
    for j, m in enumerate(series):
        ps = [point(r, x, m) for x in xs]
        axs[0].bar([i + (j - (len(series) - 1) / 2) * w for i in range(len(xs))],
                   [p["mean"] if p else 0 for p in ps], width=w, color="C%d" % j, label=m)
    axs[0].set_xticks(range(len(xs)))
    axs[0].set_xticklabels(xs, fontsize=8)
    axs[0].set_ylabel(r["metric"])
    axs[0].set_xlabel(r["x_label"])
    axs[0].set_title("tern")
    axs[0].legend(fontsize=7)
    rows = [c for c in r["compare"] if c.get("paper_value")]
    ys = range(len(rows))
    axs[1].barh(list(ys), [c["ours"] / c["paper_value"] for c in rows], color="tab:blue")
    axs[1].axvline(1.0, color="tab:gray", linestyle="--", label="thesis = 1")
    for y, c in zip(ys, rows):
        axs[1].annotate("thesis %s, tern %.3g" % (c["paper"], c["ours"]), (0, y), fontsize=7,
                        xytext=(3, 8), textcoords="offset points")
    axs[1].set_yticks(list(ys))
    axs[1].set_yticklabels([c["what"] for c in rows], fontsize=7)
    axs[1].set_xlabel("tern ÷ thesis")
    axs[1].set_title("thesis beside tern")
    axs[1].legend(fontsize=7)
    if cdf:
        for p in cdf:
            steps = p["extra"]["rtt_cdf_ms"]
            label = p["x"] if p["method"] == "store" else "%s %s" % (p["x"], p["method"])
            axs[2].step([0] + [s[0] for s in steps], [0] + [s[1] for s in steps], where="post", label=label)
        if r["experiment"].endswith("-measured"):
            # The slowest 5 % (scheduling on a shared machine) would hide the hop steps.
            p95 = [s[0] for p in cdf for s in p["extra"]["rtt_cdf_ms"] if s[1] <= 0.95]
            if p95:
                axs[2].set_xlim(0, 1.2 * max(p95))
            axs[2].set_xlabel("measured RTT (ms; 2 link traversals per switch hop), to p95")
        else:
            axs[2].set_xlabel("modelled RTT (ms, 0.4 ms per switch hop)")
        axs[2].set_ylabel("CDF of reads")
        axs[2].set_title("RTT CDF")
        axs[2].legend(fontsize=7)
    fig.suptitle("%s (%s): %s" % (r["experiment"], r["figure"], r["title"]), fontsize=9)
    return fig


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-o", "--out", required=True, help="PNG to write")
    p.add_argument("--title", default="tern kv NoCache")
    p.add_argument("report")
    a = p.parse_args()
    with open(a.report) as f:
        r = json.load(f)
    if r.get("kind") == "kv-paper-experiment":
        fig = paper(r)
    elif r.get("kind") == "kv-madinc-experiment":
        fig = madinc(r)
    elif r.get("kind") == "nocache-summary":
        fig = summary(r, a.title)
    elif "per_server_rate" in r:
        fig = rotation(r, a.title)
    elif "timeline_100ms" in r:
        fig = bench(r, a.title)
    else:
        sys.exit("%s: not a tern kv report (bench, rotation or summary)" % a.report)
    fig.tight_layout()
    fig.savefig(a.out, dpi=100)


if __name__ == "__main__":
    main()
