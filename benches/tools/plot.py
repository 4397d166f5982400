#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot.py: turns the benchmarks' JSON into PNG charts.

Inputs (any mix, any number; the kind is recognised from the content):
  - tickloop-bench's results.json (--out DIR, or --json FILE)
      latency_<workload>.png   lateness CDFs: tickloop's backends per I/O
                               backend, tickloop against the peers, and the
                               kernel's floors, each in its own panel
      main_ops.png             restart and expiry ns/op per library, one
                               panel per workload, bars from min to max round
      sweep.png                median lateness against the wait length,
                               for the lengths with enough samples
  - bench-timer-ops / bench-timer-ops-libevent
    --benchmark_out=FILE --benchmark_out_format=json
      ops_<random|equal>.png   ns/op against N (log-log), per operation one
                               panel of tickloop's backends and one of
                               tickloop against the peers (the files merge,
                               so libevent joins the others)
  - bench-scenarios --json FILE
      scenarios.png            CPU time per phase and peak RSS per library

Rules every chart keeps: at most six series in a panel, each in its own
colour; legends outside the data; every panel titled and both axes
labelled; nothing drawn from fewer samples than tickloop-bench's stated
minimums (results.json's meta: min_samples, min_tail_samples,
min_rounds), and a panel says what it left out.

Usage: plot.py [-o OUTDIR] [--quiet] FILE.json [FILE.json ...]
Needs matplotlib: Debian's python3-matplotlib (run it with /usr/bin/python3
when another python3 comes first in PATH). Exit status 3 when matplotlib
is missing, so that callers can say so.
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
    print("plot.py needs matplotlib (Debian: apt-get install python3-matplotlib; "
          "then run it with /usr/bin/python3)", file=sys.stderr)
    sys.exit(3)

DPI = 100
plt.rcParams.update({
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10,
    "legend.fontsize": 9, "xtick.labelsize": 9, "ytick.labelsize": 9,
    "figure.titlesize": 12,
})
MAX_SERIES = 6

# One colour per library, the same in every chart: twelve distinct colours
# (tab10, black and one of tab20b). A panel never holds two series of one colour: a second
# series of a library (the relative-wait fallback) takes the first colour no
# other series of the panel has.
COLORS = {
    "heap2": "#1f77b4", "heap4": "#ff7f0e", "wheel": "#2ca02c", "hwheel": "#d62728",
    "libev": "#9467bd", "libuv": "#8c564b", "libevent": "#e377c2",
    "libevent-precise": "#17becf", "asio": "#5254a3", "clock_nanosleep": "#7f7f7f",
    "epoll_pwait2": "#000000", "timerfd": "#bcbd22",
}
# For a second series of one library in a panel: colours no library has.
SPARE = ["#08306b", "#7a4f01", "#3f007d", "#00441b"]


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
    return key.startswith(("libev", "libuv", "asio"))


def style(key, impl=""):
    if key in ("clock_nanosleep", "epoll_pwait2", "timerfd"):
        return ":"
    if " relative" in impl:  # tickloop's relative-wait fallback
        return "-."
    return "--" if is_peer(key) else "-"


def panel_colors(keys):
    """A colour per series, distinct within the panel."""
    used, out = set(), []
    for key in keys:
        c = COLORS.get(key)
        if c is None or c in used:
            c = next(p for p in SPARE + list(COLORS.values()) if p not in used)
        used.add(c)
        out.append(c)
    return out


def label_of(impl):
    return impl.replace("tickloop ", "").replace("kernel ", "kernel: ")


def legend_outside(ax):
    """The legend to the right of the axes, outside the data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)


def note(ax, text):
    ax.text(0.0, -0.2, text, transform=ax.transAxes, fontsize=9, va="top", ha="left",
            wrap=True, color="#444444")


def save(fig, outdir, name):
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def grid(n, cols, width, height):
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False,
                             constrained_layout=True)
    cells = [ax for row in axes for ax in row]
    for ax in cells[n:]:
        ax.axis("off")
    return fig, cells[:n]


# ---- tickloop-bench ------------------------------------------------------

def io_of(impl):
    return impl.split("/")[-1].split()[0] if impl.startswith("tickloop ") else None


def default_panels(rows, what):
    """The panels of one latency chart, each at most MAX_SERIES rows:
    tickloop's backends per I/O backend with the timerfd floor, the default
    backend against the peers, and the kernel's floors with the default
    backend and its relative fallback."""
    def find(pred):
        return [r for r in rows if pred(r)]

    base = [r for r in rows if " slack " not in r["impl"]]
    ours = [r for r in base if r["family"] == "tickloop"]
    floor = find(lambda r: r["impl"] == "kernel timerfd")
    panels = []
    for io in dict.fromkeys(io_of(r["impl"]) for r in ours):
        mine = [r for r in ours if io_of(r["impl"]) == io and " relative" not in r["impl"]]
        panels.append((f"tickloop's timer backends on {io}", (mine + floor)[:MAX_SERIES]))
    default = [r for r in ours if lib_key(r["impl"]) == "heap4" and " relative" not in r["impl"]]
    peers = [r for r in base if r["family"] == "peer"]
    panels.append(("tickloop (heap4) against the peers", (default[:1] + peers)[:MAX_SERIES]))
    kernel = [r for r in base if r["family"] == "kernel"]
    relative = [r for r in ours if " relative" in r["impl"]]
    panels.append(("the kernel's own waits, no loop around them",
                   (kernel + default[:1] + relative[:1])[:MAX_SERIES]))
    fine = [r for r in rows if " slack " in r["impl"]]
    if fine:
        panels.append(("timer slack 1 ns", fine[:MAX_SERIES]))
    return [(t, p) for t, p in panels if p]


def cdf_panel(ax, rows, title, xlabel, xlim):
    colors = panel_colors([lib_key(r["impl"]) for r in rows])
    for r, color in zip(rows, colors):
        key = lib_key(r["impl"])
        xs = sorted(max(v, 1000) / 1e3 for v in r["lateness_ns"])  # us; log axis needs > 0
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, style(key, r["impl"]), where="post", linewidth=1.8, color=color,
                label=f"{label_of(r['impl'])} (n={len(xs):,})")
    ax.set_xscale("log")
    ax.set_xlim(*xlim)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of timers fired within")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)


def plot_latency(doc, outdir):
    meta = doc.get("meta", {})
    min_n = int(meta.get("min_samples", 100))
    min_rounds = int(meta.get("min_rounds", 3))
    results = [r for r in doc.get("results", []) if not r.get("skipped")]
    written = []
    for workload, what in (("chain", "chain: one timer at a time, each callback arms the next"),
                           ("open", "open: hundreds of timers armed at once")):
        rows = [r for r in results if r["workload"] == workload
                and len(r.get("lateness_ns") or []) >= min_n]
        if not rows:
            continue
        panels = default_panels(rows, what)
        # One lateness range for every panel: from the least late sample
        # drawn to 20 ms.
        lo = min(max(v, 1000) for _, rs in panels for r in rs for v in r["lateness_ns"]) / 1e3
        fig, cells = grid(len(panels), 2, 7.6, 4.4)
        for ax, (title, panel_rows) in zip(cells, panels):
            cdf_panel(ax, panel_rows, title, "lateness (us, log scale)", (lo * 0.8, 2e4))
        fig.suptitle(f"timer lateness, {what}: callback time minus deadline "
                     f"(tickloop-bench; left is better)")
        written.append(save(fig, outdir, f"latency_{workload}.png"))

    written += plot_sweep(results, outdir, min_n)

    ops = [r for r in results if r.get("round_ns_per_op") is not None
           and r["workload"].startswith(("restart", "expire"))]
    if ops:
        workloads = list(dict.fromkeys((r["workload"], r["population"]) for r in ops))
        fig, cells = grid(len(workloads), 3, 5.0, 3.9)
        for ax, (workload, pop) in zip(cells, workloads):
            rows = [r for r in ops if r["workload"] == workload and r["population"] == pop]
            left_out = [lib_key(r["impl"]) for r in rows
                        if len(r["round_ns_per_op"]) < min_rounds]
            rows = [r for r in rows if len(r["round_ns_per_op"]) >= min_rounds]
            keys = [lib_key(r["impl"]) for r in rows]
            med = [r["ns_per_op"] for r in rows]
            lo = [m - min(r["round_ns_per_op"]) for m, r in zip(med, rows)]
            hi = [max(r["round_ns_per_op"]) - m for m, r in zip(med, rows)]
            bars = ax.bar(range(len(rows)), med, color=panel_colors(keys),
                          yerr=[lo, hi], capsize=3, ecolor="#333333")
            ax.bar_label(bars, fmt="%.0f", fontsize=9, padding=2)
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels(keys, rotation=35, ha="right")
            ax.set_ylabel("ns per operation (CPU)")
            ax.set_xlabel("library (tickloop: timer backend)")
            ax.set_title(f"{workload}, {pop:,} live")
            ax.margins(y=0.15)
            ax.grid(True, axis="y", alpha=0.3)
            if left_out:
                note(ax, f"not drawn (fewer than {min_rounds} rounds): {', '.join(left_out)}")
        fig.suptitle("timer operations in the main job: median of rounds, whisker from the "
                     "fastest to the slowest round (lower is better)")
        written.append(save(fig, outdir, "main_ops.png"))
    return written


def plot_sweep(results, outdir, min_n):
    """p50 lateness per wait length, for the lengths with at least min_n
    samples; the panel lists the lengths it left out."""
    rows = [r for r in results if r["workload"].startswith("sweep-") and r.get("lateness_ns")]
    if not rows:
        return []

    def wait_ns(label):
        m = re.match(r"^(\d+)(ms|s)$", label)
        return int(m.group(1)) * (1_000_000 if m.group(2) == "ms" else 1_000_000_000)

    labels = sorted(dict.fromkeys(r["workload"][len("sweep-"):] for r in rows), key=wait_ns)
    by_impl = defaultdict(dict)
    for r in rows:
        by_impl[r["impl"]][r["workload"][len("sweep-"):]] = r
    short = sorted({lab for lab in labels for r in by_impl.values()
                    if lab in r and len(r[lab]["lateness_ns"]) < min_n}, key=wait_ns)
    impls = list(by_impl)
    ours = [i for i in impls if i.startswith("tickloop ")]
    floor = [i for i in impls if i == "kernel timerfd"]
    panels = []
    for io in dict.fromkeys(io_of(i) for i in ours):
        mine = [i for i in ours if io_of(i) == io and " relative" not in i]
        panels.append((f"tickloop's timer backends on {io}", (mine + floor)[:MAX_SERIES]))
    default = [i for i in ours if lib_key(i) == "heap4" and " relative" not in i][:1]
    peers = [i for i in impls if not i.startswith(("tickloop ", "kernel "))]
    panels.append(("tickloop (heap4) against the peers", (default + peers)[:MAX_SERIES]))
    relative = [i for i in ours if " relative" in i]
    kernel = [i for i in impls if i.startswith("kernel ")]
    panels.append(("absolute and relative waits", (default + relative + kernel)[:MAX_SERIES]))
    fig, cells = grid(len(panels), 2, 7.6, 4.2)
    for ax, (title, panel) in zip(cells, panels):
        colors = panel_colors([lib_key(i) for i in panel])
        for impl, color in zip(panel, colors):
            xs, med = [], []
            for label in labels:
                r = by_impl[impl].get(label)
                if not r or len(r["lateness_ns"]) < min_n:
                    continue
                v = sorted(r["lateness_ns"])
                xs.append(wait_ns(label) / 1e6)
                med.append(max(v[(len(v) - 1) // 2], 1000) / 1e3)
            if xs:
                ax.plot(xs, med, style(lib_key(impl), impl), marker="o", markersize=5,
                        linewidth=1.8, color=color, label=label_of(impl))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        # Plain numbers at 2x and 5x: a narrow log range has no decade label.
        ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.set_xlabel("wait length (ms, log scale)")
        ax.set_ylabel("median lateness (us, log scale)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        legend_outside(ax)
        if short:
            note(ax, f"not drawn: waits of {', '.join(short)} (fewer than {min_n} samples; "
                 f"summary.txt gives them)")
    fig.suptitle("lone timers, one wait at a time: median lateness against the wait length "
                 "(tickloop-bench sweep; lower is better)")
    return [save(fig, outdir, "sweep.png")]


# ---- Google Benchmark ----------------------------------------------------

# bench-timer-ops row names: <operation>/<library>/n:<N>[/equal:<0|1|2>][/layout:<0|1>]
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
        deadlines = {"1": "equal", "2": "batches"}.get(equal, "random")
        yield op, lib, deadlines, int(n), float(b["ns_per_op"])


TICKLOOP_BACKENDS = ["heap4", "heap2", "hwheel", "wheel"]


def ops_panel(ax, by_lib, libs, title):
    libs = [lib for lib in libs if lib in by_lib and len(by_lib[lib]) > 1][:MAX_SERIES]
    for lib, color in zip(libs, panel_colors(libs)):
        points = sorted(by_lib[lib].items())
        ax.plot([p[0] for p in points], [p[1] for p in points], style(lib), marker="o",
                markersize=4, linewidth=1.8, label=lib, color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # Plain numbers on the y axis: a narrow log range has no decade label.
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_xlabel("live timers N (log scale)")
    ax.set_ylabel("ns per operation (CPU)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)


def plot_ops(docs, outdir):
    # deadlines -> op -> lib -> {n: ns}; a later file overrides an earlier one
    series = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for doc in docs:
        for op, lib, deadlines, n, ns in gb_rows(doc):
            series[deadlines][op][lib][n] = ns
    order = ["start_stop", "restart", "cancel", "expire (start order)", "expire (shuffled)"]
    what = {"random": "distinct random deadlines (1 s - 10 min; expire: 0 - 20 ms)",
            "equal": "all deadlines equal", "batches": "deadlines equal in batches of 256"}
    written = []
    for deadlines, ops in sorted(series.items()):
        sweeps = [op for op in order if op in ops] + [op for op in ops if op not in order]
        sweeps = [op for op in sweeps if any(len(v) > 1 for v in ops[op].values())]
        if not sweeps:
            continue
        fig, cells = grid(2 * len(sweeps), 2, 6.6, 3.7)
        for k, op in enumerate(sweeps):
            libs = list(ops[op])
            peers = sorted(lib for lib in libs if lib not in TICKLOOP_BACKENDS)
            ops_panel(cells[2 * k], ops[op], TICKLOOP_BACKENDS + peers[:1],
                      f"{op}: tickloop's backends" + (f" and {peers[0]}" if peers else ""))
            ops_panel(cells[2 * k + 1], ops[op], ["heap4", "hwheel"] + peers,
                      f"{op}: heap4 and hwheel against the peers")
        fig.suptitle(f"bench-timer-ops, {what.get(deadlines, deadlines)} (lower is better)")
        written.append(save(fig, outdir, f"ops_{deadlines}.png"))
    return written


# ---- bench-scenarios -----------------------------------------------------

def plot_scenarios(doc, outdir):
    rows = [r for r in doc.get("scenarios", []) if not r.get("error")]
    names = list(dict.fromkeys(r["scenario"] for r in rows))
    if not names:
        return []
    fig, axes = plt.subplots(2, len(names), figsize=(5.4 * len(names), 8.2), squeeze=False,
                             constrained_layout=True)
    shades = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]
    for col, name in enumerate(names):
        srows = [r for r in rows if r["scenario"] == name][:8]
        keys = [r["lib"] for r in srows]
        ax = axes[0][col]
        bottom = [0.0] * len(srows)
        phases = list(dict.fromkeys(p["name"] for r in srows for p in r["phases"]))
        for k, phase in enumerate(phases[:MAX_SERIES]):
            vals = [next((p["cpu_ns"] / 1e9 for p in r["phases"] if p["name"] == phase), 0)
                    for r in srows]
            ax.bar(range(len(srows)), vals, bottom=bottom, label=phase, color=shades[k])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_title(f"{name}: CPU time per phase")
        ax.set_ylabel("process CPU time (s)")
        ax.legend(loc="upper left", bbox_to_anchor=(0, -0.32), ncol=2, frameon=False,
                  title="phase")
        ax = axes[1][col]
        ax.bar(range(len(srows)), [r["maxrss_kb"] / 1024 for r in srows],
               color=panel_colors(keys))
        ax.set_title(f"{name}: peak RSS")
        ax.set_ylabel("peak resident memory (MB)")
        for a in (axes[0][col], axes[1][col]):
            a.set_xticks(range(len(srows)))
            a.set_xticklabels(keys, rotation=35, ha="right")
            a.set_xlabel("library (tickloop: timer backend)")
            a.grid(True, axis="y", alpha=0.3)
    fig.suptitle("bench-scenarios: each library in a fresh process (lower is better)")
    return [save(fig, outdir, "scenarios.png")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--outdir", default=".", help="where to write the PNGs")
    ap.add_argument("--quiet", action="store_true", help="do not list the PNGs written")
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
    if not args.quiet:
        for path in written:
            print(path)


if __name__ == "__main__":
    main()
