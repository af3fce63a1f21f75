"""Summary of scripts/virt/veth-bench.sh: ROWS (one JSON object per measurement) META OUT_DIR.

Per function and figure: the median per side over the rounds, the sliced / native ratio per
round (both sides are measured back to back in every round, A B then B A), the median ratio,
its min-max and a 95 % bootstrap interval (rounds resampled, 4000 draws, fixed seed), and a
verdict against 5 %. Writes OUT_DIR/veth_abba.json and OUT_DIR/veth_abba.md.
"""

import json
import os
import random
import statistics
import sys

# figure -> (label, how to read it from a row, "higher" or "lower" is better)
FIGURES = [
    ("rate_pps", "delivered frames/s (saturating)", lambda r: r["rate"]["rx_pps"], "higher"),
    ("cpu_us_per_frame", "switch CPU µs / frame", None, "lower"),
    ("lat_p50_us", "one-way p50 µs", lambda r: r["latency"]["p50_ns"] / 1e3, "lower"),
    ("lat_p99_us", "one-way p99 µs", lambda r: r["latency"]["p99_ns"] / 1e3, "lower"),
    ("lat_p999_us", "one-way p99.9 µs", lambda r: r["latency"]["p999_ns"] / 1e3, "lower"),
]
LIMIT = 0.05
# Latency quantiles are taken from the rounds' pooled histograms (the probe's buckets: 100 ns
# below 200 µs, 10 µs below 20 ms, one above): one stalled round (a few ms on a busy machine)
# then moves the pooled p99 little, where it moves its own round's p99 by orders of magnitude.
POOLED = {"lat_p50_us": 0.50, "lat_p99_us": 0.99, "lat_p999_us": 0.999}
NBUCKETS = 3981


def bucket_mid_us(b):
    if b < 2000:
        return (b * 100 + 50) / 1e3
    if b < 3980:
        return (200_000 + (b - 2000) * 10_000 + 5_000) / 1e3
    return 20_000.0


def cumulative(hist):
    """Dense prefix sums of a probe histogram ([[bucket, count], ...])."""
    dense = [0] * NBUCKETS
    for b, n in hist:
        dense[b] += n
    run, out = 0, []
    for n in dense:
        run += n
        out.append(run)
    return out


def pooled_quantile(cums, q):
    """Nearest-rank q-quantile (µs, bucket middle) of the sum of these cumulative histograms."""
    total = sum(c[-1] for c in cums)
    if total == 0:
        return None
    rank = max(1, -(-int(q * total * 1e6) // 1_000_000))
    lo, hi = 0, NBUCKETS - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(c[mid] for c in cums) >= rank:
            hi = mid
        else:
            lo = mid + 1
    return bucket_mid_us(lo)


def cpu_per_frame(r):
    frames = r["rate"]["received_total"]
    return r["switch_cpu_ns"] / 1e3 / frames if frames else None


def value(fig, r):
    for name, _, get, _ in FIGURES:
        if name == fig:
            return cpu_per_frame(r) if get is None else get(r)
    raise KeyError(fig)


def bootstrap(ratios, rng, draws=4000):
    meds = sorted(
        statistics.median(rng.choice(ratios) for _ in ratios) for _ in range(draws)
    )
    return meds[int(0.025 * draws)], meds[int(0.975 * draws) - 1]


def verdict(lo, hi, better):
    """Within 5 % when the interval stays on the good side of the limit."""
    if better == "higher":
        if lo >= 1 - LIMIT:
            return "within 5 %"
        if hi < 1 - LIMIT:
            return "beyond 5 %"
    else:
        if hi <= 1 + LIMIT:
            return "within 5 %"
        if lo > 1 + LIMIT:
            return "beyond 5 %"
    return "unresolved"


def summarize(rows):
    rng = random.Random(17)
    out = {}
    fns = []
    for r in rows:
        if r["function"] not in fns:
            fns.append(r["function"])
    for fn in fns:
        by_round = {}
        for r in rows:
            if r["function"] == fn:
                by_round.setdefault(r["round"], {})[r["side"]] = r
        rounds = [v for _, v in sorted(by_round.items()) if "native" in v and "sliced" in v]
        figs = {}
        pooled = all("hist" in v[side]["latency"] for v in rounds for side in ("native", "sliced"))
        cums = {
            side: [cumulative(v[side]["latency"]["hist"]) for v in rounds] if pooled else []
            for side in ("native", "sliced")
        }
        for name, label, _, better in FIGURES:
            nat = [value(name, v["native"]) for v in rounds]
            sl = [value(name, v["sliced"]) for v in rounds]
            ratios = [s / n for s, n in zip(sl, nat) if s is not None and n]
            if not ratios:
                continue
            lo, hi = bootstrap(ratios, rng)
            extra = {}
            if pooled and name in POOLED:
                q = POOLED[name]
                pn, ps = pooled_quantile(cums["native"], q), pooled_quantile(cums["sliced"], q)
                # Rounds resampled as pairs, both sides pooled over the same draw.
                draws = []
                for _ in range(1000):
                    pick = [rng.randrange(len(rounds)) for _ in rounds]
                    n = pooled_quantile([cums["native"][i] for i in pick], q)
                    sl_ = pooled_quantile([cums["sliced"][i] for i in pick], q)
                    if n and sl_:
                        draws.append(sl_ / n)
                draws.sort()
                lo, hi = draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1]
                extra = {"pooled": True, "pooled_native": pn, "pooled_sliced": ps,
                         "pooled_ratio": ps / pn if pn and ps else None}
            figs[name] = {
                "label": label,
                "better": better,
                "native": [x for x in nat],
                "sliced": [x for x in sl],
                "native_median": statistics.median(x for x in nat if x is not None),
                "sliced_median": statistics.median(x for x in sl if x is not None),
                "ratios": ratios,
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "ratio_ci95": [lo, hi],
                "verdict": verdict(lo, hi, better),
                **extra,
            }
        loss = {
            side: statistics.median(v[side]["rate"]["loss"] for v in rounds)
            for side in ("native", "sliced")
        }
        lat_loss = {
            side: statistics.median(
                1 - v[side]["latency"]["received"] / max(1, v[side]["latency"]["sent"])
                for v in rounds
            )
            for side in ("native", "sliced")
        }
        samples = {
            side: statistics.median(v[side]["latency"]["received"] for v in rounds)
            for side in ("native", "sliced")
        }
        out[fn] = {
            "rounds": len(rounds),
            "figures": figs,
            "rate_loss_median": loss,
            "latency_loss_median": lat_loss,
            "latency_samples_per_round_median": samples,
        }
    return out


def fmt(x):
    if x is None:
        return "n/a"
    if abs(x) >= 1000:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.2f" % x


def markdown(summary, meta):
    m = meta
    lines = [
        "# Sliced vs native on veth, alternated rounds (scripts/virt/veth-bench.sh)",
        "",
        "%s – %s, %d CPUs, kernel %s, load average %s at the start and %s at the end. "
        "%d rounds per function (A B, then B A, ...); per side and round: %.1f s saturating "
        "(64-frame `sendmmsg` batches) and %.1f s at %d frames/s for the one-way delay "
        "(payload timestamp; \"paired\": both sides in the same run, frames alternating A B B A), "
        "each after %.1f s of warm-up; the two veth sets swapped after half the rounds. Probe on CPU %d, every switch "
        "process on CPU %d, scheduling: %s, latency probe: %s."
        % (m["start"], m["end"], m["nproc"], m["kernel"], m["load_start"], m["load_end"],
           m["rounds"], m["rate_seconds"], m["latency_seconds"], m["latency_pps"],
           m["warmup_seconds"], m["probe_cpu"], m["switch_cpu"], m.get("sched", "-"),
           m.get("latency_probe", "-")),
        "",
    ]
    if m.get("control"):
        lines += [
            "**A/A control run (CONTROL=1): the \"sliced\" column is a second native "
            "`tern run` on its own veths**; the ratios show the measurement's own spread.",
            "",
        ]
    lines += [
        "Rate and CPU: ratio = sliced / native per round; the median of the rounds, their "
        "min–max and a 95 % bootstrap interval (rounds resampled). Latency: each side's "
        "quantile over all its rounds' delays pooled (histograms, 0.1 µs buckets below "
        "200 µs), the ratio of those, the min–max of the per-round ratios, and a 95 % "
        "bootstrap interval of the pooled ratio (rounds resampled in pairs). Verdict: the interval on the good side of "
        "5 % (rate ≥ 0.95×, CPU and latency ≤ 1.05×) is \"within 5 %\" (sliced no more than "
        "5 % worse; it may be better), wholly past it \"beyond 5 %\", else \"unresolved\" "
        "(the measurement cannot tell). The interval's width is the resolution: a figure "
        "resolves 5 % in both directions only when it is well under 10 %.",
        "",
        "| function | figure | native (median) | sliced (median) | ratio | min–max | 95 % interval | interval width | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for fn, s in summary.items():
        for name, f in s["figures"].items():
            if f.get("pooled"):
                lines.append(
                    "| %s | %s, rounds pooled | %s | %s | %.3f | %.3f–%.3f | %.3f–%.3f | %.1f %% | %s |"
                    % (fn, f["label"], fmt(f["pooled_native"]), fmt(f["pooled_sliced"]),
                       f["pooled_ratio"], f["ratio_min"], f["ratio_max"], f["ratio_ci95"][0],
                       f["ratio_ci95"][1], 100 * (f["ratio_ci95"][1] - f["ratio_ci95"][0]),
                       f["verdict"]))
                continue
            lines.append(
                "| %s | %s | %s | %s | %.3f | %.3f–%.3f | %.3f–%.3f | %.1f %% | %s |"
                % (fn, f["label"], fmt(f["native_median"]), fmt(f["sliced_median"]),
                   f["ratio_median"], f["ratio_min"], f["ratio_max"], f["ratio_ci95"][0],
                   f["ratio_ci95"][1], 100 * (f["ratio_ci95"][1] - f["ratio_ci95"][0]),
                   f["verdict"]))
    lines += [
        "",
        "| function | rounds | loss saturating native / sliced | loss at the latency rate native / sliced | delay samples per round |",
        "|---|---|---|---|---|",
    ]
    for fn, s in summary.items():
        lines.append(
            "| %s | %d | %.2f %% / %.2f %% | %.3f %% / %.3f %% | %d |"
            % (fn, s["rounds"], 100 * s["rate_loss_median"]["native"],
               100 * s["rate_loss_median"]["sliced"], 100 * s["latency_loss_median"]["native"],
               100 * s["latency_loss_median"]["sliced"],
               s["latency_samples_per_round_median"]["native"]))
    return "\n".join(lines) + "\n"


def main():
    rows_path, meta, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    rows = [json.loads(line) for line in open(rows_path) if line.strip()]
    summary = summarize(rows)
    # The rows without their histograms (pooled into the summary already; they would make
    # the file megabytes).
    slim = [dict(r, latency={k: v for k, v in r["latency"].items() if k != "hist"}) for r in rows]
    with open(os.path.join(out, "veth_abba.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "rows": slim}, f, indent=1)
    md = markdown(summary, meta)
    with open(os.path.join(out, "veth_abba.md"), "w") as f:
        f.write(md)
    print(md)
    print("wrote %s/veth_abba.json and veth_abba.md" % out)


if __name__ == "__main__":
    main()
