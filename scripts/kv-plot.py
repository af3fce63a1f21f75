"""Plots for tern kv reports (see scripts/kv-plot.sh).

Kinds, told apart by their fields:
* bench report (`timeline_100ms`): throughput over time, latency CDF, per-server load;
* rotation report (`per_server_rate`): per emulated server request rate and request share;
* experiment summary (`kind` = "nocache-summary"): throughput per workload, scalability,
  latency against offered load, throughput over time under dynamic popularity.
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


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("-o", "--out", required=True, help="PNG to write")
    p.add_argument("--title", default="tern kv NoCache")
    p.add_argument("report")
    a = p.parse_args()
    with open(a.report) as f:
        r = json.load(f)
    if r.get("kind") == "nocache-summary":
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
