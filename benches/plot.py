#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot.py: turns the benchmarks' JSON into PNG charts.

Inputs (any mix, any number; the kind is recognised from the content):
  - tickloop-bench --json FILE
      latency_<workload>.png   lateness CDFs, one panel per I/O backend (and
                               one for the rows at timer slack 1 ns), each
                               with the kernel floors and the peers
      main_ops.png             restart and expiry ns/op per library
      sweep.png                median lateness against the wait length (1 ms -
                               5 s), one panel per I/O backend, with the
                               relative-wait fallback, the kernel floors
                               and the peers
  - bench-timer-ops / bench-timer-ops-libevent
    --benchmark_out=FILE --benchmark_out_format=json
      ops_<random|equal>.png   ns/op against N (log-log), one panel per
                               operation, one line per backend and peer (the
                               files merge, so libevent joins the others)
  - bench-scenarios --json FILE
      scenarios.png            CPU time per phase and peak RSS per library

Usage: plot.py [-o OUTDIR] FILE.json [FILE.json ...]
Needs matplotlib: Debian's python3-matplotlib (run it with /usr/bin/python3
when another python3 comes first in PATH).
"""

import argparse
import json
import os
import re
import sys
from collections import defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on a build machine
    import matplotlib.pyplot as plt
    import matplotlib.ticker
except ImportError:
    sys.exit("plot.py needs matplotlib (apt-get install python3-matplotlib; "
             "then run it with /usr/bin/python3)")

DPI = 90  # keeps a full set of PNGs well under 1 MB

# One colour per library, the same in every chart.
COLORS = {
    "heap2": "#1f77b4", "heap4": "#ff7f0e", "wheel": "#2ca02c", "hwheel": "#d62728",
    "libev": "#9467bd", "libuv": "#8c564b", "libevent": "#e377c2",
    "libevent-precise": "#17becf", "clock_nanosleep": "#7f7f7f",
    "epoll_pwait2": "#000000", "timerfd": "#bcbd22",
}


def lib_key(impl):
    """'tickloop heap4/epoll slack 1ns' -> 'heap4'; 'libev 4.33' -> 'libev';
    'kernel epoll_pwait2' -> 'epoll_pwait2'; 'libevent 2.1 precise' ->
    'libevent-precise'; a Google Benchmark label is returned as it is."""
    words = impl.split()
    if words[0] == "tickloop" and len(words) > 1:
        return words[1].split("/")[0]
    if words[0] == "kernel" and len(words) > 1:
        return words[1]
    if words[0] == "libevent" and "precise" in words:
        return "libevent-precise"
    return words[0]


def is_peer(key):
    return key.startswith(("libev", "libuv"))


def style(key, impl=""):
    if key in ("clock_nanosleep", "epoll_pwait2", "timerfd"):
        return ":"
    if " relative" in impl:  # tickloop's relative-wait fallback
        return "-."
    return "--" if is_peer(key) else "-"


def save(fig, outdir, name):
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


# ---- tickloop-bench ------------------------------------------------------

def cdf_panel(ax, rows, title):
    for r in rows:
        key = lib_key(r["impl"])
        xs = sorted(max(v, 1000) / 1e3 for v in r["lateness_ns"])  # us; log axis needs > 0
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        label = r["impl"].replace("tickloop ", "")
        ax.step(xs, ys, style(key, r["impl"]), where="post", label=label, linewidth=1.3,
                color=COLORS.get(key))
    ax.set_xscale("log")
    ax.set_xlim(10, 2e4)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("lateness (us, log scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)


def plot_latency(doc, outdir):
    results = [r for r in doc.get("results", []) if not r.get("skipped")]
    written = []
    for workload in ("chain", "open"):
        rows = [r for r in results if r["workload"] == workload and r.get("lateness_ns")]
        if not rows:
            continue
        fine = [r for r in rows if " slack " in r["impl"]]
        base = [r for r in rows if " slack " not in r["impl"]]
        others = [r for r in base if r["family"] != "tickloop"]
        ios = list(dict.fromkeys(r["impl"].split("/")[-1].split()[0]
                                 for r in base if r["family"] == "tickloop"))
        panels = []
        for io in ios:
            ours = [r for r in base if r["family"] == "tickloop"
                    and r["impl"].split("/")[-1].split()[0] == io]
            panels.append((f"tickloop on {io}, kernel floors, peers", ours + others))
        if fine:
            slack = doc.get("meta", {}).get("timerslack_ns", "default")
            panels.append((f"timer slack 1 ns (others: {slack} ns)", fine))
        fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 5), sharey=True,
                                 squeeze=False)
        for ax, (title, panel_rows) in zip(axes[0], panels):
            cdf_panel(ax, panel_rows, title)
        axes[0][0].set_ylabel("fraction of timers fired within")
        fig.suptitle(f"timer lateness, {workload} workload: callback time - deadline "
                     f"(tickloop-bench; left is better)")
        written.append(save(fig, outdir, f"latency_{workload}.png"))

    written += plot_sweep(results, outdir)

    ops = [r for r in results if r.get("ops") and r["workload"] != "chain"
           and r["workload"] != "open"]
    if ops:
        workloads = list(dict.fromkeys((r["workload"], r["population"]) for r in ops))
        fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 4.2),
                                 squeeze=False)
        for ax, (workload, pop) in zip(axes[0], workloads):
            rows = [r for r in ops if r["workload"] == workload and r["population"] == pop]
            keys = [lib_key(r["impl"]) for r in rows]
            bars = ax.bar(range(len(rows)), [r["ns_per_op"] for r in rows],
                          color=[COLORS.get(k, "#999999") for k in keys])
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels(keys, rotation=45, ha="right", fontsize=8)
            ax.set_title(f"{workload}, {pop:,} live", fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
        axes[0][0].set_ylabel("ns per operation (thread CPU time)")
        fig.suptitle("timer operations in the main job (lower is better)")
        fig.tight_layout()
        written.append(save(fig, outdir, "main_ops.png"))
    return written


def plot_sweep(results, outdir):
    """Median lateness per wait length; each point also shows the maximum
    as a thin bar above it (the sweep takes few samples by default)."""
    rows = [r for r in results if r["workload"].startswith("sweep-") and r.get("lateness_ns")]
    if not rows:
        return []
    labels = list(dict.fromkeys(r["workload"][len("sweep-"):] for r in rows))

    def wait_ns(label):
        m = re.match(r"^(\d+)(ms|s)$", label)
        return int(m.group(1)) * (1_000_000 if m.group(2) == "ms" else 1_000_000_000)

    labels.sort(key=wait_ns)
    by_impl = defaultdict(dict)
    for r in rows:
        by_impl[r["impl"]][r["workload"][len("sweep-"):]] = r
    impls = list(by_impl)
    ios = list(dict.fromkeys(i.split("/")[-1].split()[0] for i in impls
                             if i.startswith("tickloop ")))
    others = [i for i in impls if not i.startswith("tickloop ")]
    fig, axes = plt.subplots(1, len(ios), figsize=(6.2 * len(ios), 5.2), sharey=True,
                             squeeze=False)
    for ax, io in zip(axes[0], ios):
        ours = [i for i in impls if i.startswith("tickloop ")
                and i.split("/")[-1].split()[0] == io]
        for impl in ours + others:
            key = lib_key(impl)
            xs, med, top = [], [], []
            for label in labels:
                r = by_impl[impl].get(label)
                if not r:
                    continue
                v = sorted(r["lateness_ns"])
                xs.append(wait_ns(label) / 1e6)
                med.append(max(v[(len(v) - 1) // 2], 1000) / 1e3)
                top.append(max(v[-1], 1000) / 1e3)
            ax.plot(xs, med, style(key, impl), marker="o", markersize=3, linewidth=1.3,
                    color=COLORS.get(key), label=impl.replace("tickloop ", ""))
            ax.vlines(xs, med, top, color=COLORS.get(key), alpha=0.25, linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("wait length (ms, log scale)")
        ax.set_title(f"tickloop on {io}, kernel floors, peers", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    axes[0][0].set_ylabel("median lateness (us, log scale; bar: up to the max)")
    fig.suptitle("lone timers, one wait at a time: median lateness against the wait length "
                 "(tickloop-bench sweep; lower is better)")
    return [save(fig, outdir, "sweep.png")]


# ---- Google Benchmark ----------------------------------------------------

# bench-timer-ops row names: <operation>/<library>/n:<N>[/equal:<0|1>][/layout:<0|1>]
GB_NAME = re.compile(r"^(\w+)/([^/]+)/n:(\d+)(?:/equal:(\d))?(?:/layout:(\d))?")


def gb_rows(doc):
    """(operation, library, deadlines, n, ns_per_op) from a Google Benchmark
    JSON file; medians when it was run with repetitions, else the iterations.
    expire rows become 'expire (start order)' and 'expire (shuffled)'."""
    rows = doc.get("benchmarks", [])
    if any(b.get("aggregate_name") == "median" for b in rows):
        rows = [b for b in rows if b.get("aggregate_name") == "median"]
    else:
        rows = [b for b in rows if b.get("run_type", "iteration") == "iteration"]
    for b in rows:
        m = GB_NAME.match(b.get("run_name", b["name"]))
        if not m or "ns_per_op" not in b or b.get("error_occurred"):
            continue
        op, lib, n, equal, layout = m.groups()
        if layout is not None:
            op += " (shuffled)" if layout == "1" else " (start order)"
        yield op, lib, "equal" if equal == "1" else "random", int(n), float(b["ns_per_op"])


def plot_ops(docs, outdir):
    # deadlines -> op -> lib -> {n: ns}; a later file overrides an earlier one
    series = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for doc in docs:
        for op, lib, deadlines, n, ns in gb_rows(doc):
            series[deadlines][op][lib][n] = ns
    order = ["start_stop", "restart", "cancel", "expire (start order)", "expire (shuffled)"]
    written = []
    for deadlines, ops in sorted(series.items()):
        sweeps = [op for op in order if op in ops] + [op for op in ops if op not in order]
        sweeps = [op for op in sweeps if any(len(v) > 1 for v in ops[op].values())]
        if not sweeps:
            continue
        cols = min(3, len(sweeps))
        nrows = (len(sweeps) + 1 + cols - 1) // cols  # one cell more, for the legend
        fig, axes = plt.subplots(nrows, cols, figsize=(4.8 * cols, 4.0 * nrows), squeeze=False)
        cells = [ax for row in axes for ax in row]
        for ax, op in zip(cells, sweeps):
            for lib, by_n in sorted(ops[op].items(), key=lambda kv: (is_peer(kv[0]), kv[0])):
                points = sorted(by_n.items())
                ax.plot([p[0] for p in points], [p[1] for p in points], style(lib),
                        marker="o", markersize=3, label=lib, color=COLORS.get(lib))
            ax.set_xscale("log")
            ax.set_yscale("log")
            # Plain numbers on the y axis: a narrow log range has no decade label.
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.set_xlabel("live timers N")
            ax.set_ylabel("ns per operation (thread CPU time)", fontsize=8)
            ax.set_title(op, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        handles, labels = cells[0].get_legend_handles_labels()
        for ax in cells[len(sweeps):]:
            ax.axis("off")
        cells[len(sweeps)].legend(handles, labels, loc="center", fontsize=10)
        what = ("distinct random deadlines (1 s - 10 min; expire: 0 - 20 ms)"
                if deadlines == "random" else "all deadlines equal")
        fig.suptitle(f"bench-timer-ops, {what} (lower is better)")
        fig.tight_layout()
        written.append(save(fig, outdir, f"ops_{deadlines}.png"))
    return written


# ---- bench-scenarios -----------------------------------------------------

def plot_scenarios(doc, outdir):
    rows = [r for r in doc.get("scenarios", []) if not r.get("error")]
    names = list(dict.fromkeys(r["scenario"] for r in rows))
    if not names:
        return []
    fig, axes = plt.subplots(2, len(names), figsize=(4.6 * len(names), 7.5), squeeze=False)
    for col, name in enumerate(names):
        srows = [r for r in rows if r["scenario"] == name]
        keys = [r["lib"] for r in srows]
        ax = axes[0][col]
        bottom = [0.0] * len(srows)
        phases = list(dict.fromkeys(p["name"] for r in srows for p in r["phases"]))
        shades = ["#4c72b0", "#dd8452", "#55a868", "#c44e52"]
        for k, phase in enumerate(phases):
            vals = [next((p["cpu_ns"] / 1e9 for p in r["phases"] if p["name"] == phase), 0)
                    for r in srows]
            ax.bar(range(len(srows)), vals, bottom=bottom, label=phase,
                   color=shades[k % len(shades)])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(f"{name}: CPU time per phase", fontsize=10)
        ax.set_ylabel("process CPU s")
        ax.legend(fontsize=7)
        ax = axes[1][col]
        ax.bar(range(len(srows)), [r["maxrss_kb"] / 1024 for r in srows],
               color=[COLORS.get(k, "#999999") for k in keys])
        ax.set_title(f"{name}: peak RSS", fontsize=10)
        ax.set_ylabel("MB")
        for a in (axes[0][col], axes[1][col]):
            a.set_xticks(range(len(srows)))
            a.set_xticklabels(keys, rotation=45, ha="right", fontsize=8)
            a.grid(True, axis="y", alpha=0.3)
    fig.suptitle("bench-scenarios: each library in a fresh process (lower is better)")
    fig.tight_layout()
    return [save(fig, outdir, "scenarios.png")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--outdir", default=".", help="where to write the PNGs")
    ap.add_argument("files", nargs="+", help="JSON from the benchmarks")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    written, gb_docs = [], []
    for path in args.files:
        with open(path) as f:
            doc = json.load(f)
        if "benchmarks" in doc:
            gb_docs.append(doc)
        elif "results" in doc:
            written += plot_latency(doc, args.outdir)
        elif "scenarios" in doc:
            written += plot_scenarios(doc, args.outdir)
        else:
            print(f"{path}: not JSON from these benchmarks, skipped", file=sys.stderr)
    if gb_docs:
        written += plot_ops(gb_docs, args.outdir)
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
