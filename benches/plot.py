#!/usr/bin/env python3
"""plot.py: turns the benchmarks' JSON into PNG charts.

Inputs (any mix, any number):
  - tickloop-bench --json FILE        -> latency_<workload>.png: the CDF of
    lateness per implementation (log x axis), one chart per workload, plus
    restart.png (ns/op per implementation, one bar group per population);
  - bench-timer-ops / bench-timer-ops-libevent
    --benchmark_out=FILE --benchmark_out_format=json
                                      -> ops_<operation>_<random|equal>.png:
    ns/op against N, log-log, one line per library (several files merge, so
    the libevent rows join the others' charts).

Usage: plot.py [-o OUTDIR] FILE.json [FILE.json ...]
Needs matplotlib (Debian: python3-matplotlib, i.e. run it with /usr/bin/python3
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
except ImportError:
    sys.exit("plot.py needs matplotlib (apt install python3-matplotlib; "
             "then run it with /usr/bin/python3)")

# bench-timer-ops row names: <operation>/<library>/n:<N>[/equal:<0|1>][/...]
GB_NAME = re.compile(r"^(\w+)/([^/]+)/n:(\d+)(?:/equal:(\d))?")


def plot_latency(doc, outdir):
    by_workload = defaultdict(list)
    for r in doc.get("results", []):
        if r.get("skipped") or "lateness_ns" not in r or not r["lateness_ns"]:
            continue
        by_workload[r["workload"]].append(r)
    written = []
    for workload, rows in by_workload.items():
        fig, ax = plt.subplots(figsize=(10, 6))
        colors = plt.cm.tab20.colors  # 20 distinct colours: one per row
        for i, r in enumerate(rows):
            xs = sorted(max(v, 1) / 1e3 for v in r["lateness_ns"])  # us; log axis needs > 0
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            style = {"tickloop": "-", "kernel": ":", "peer": "--"}.get(r["family"], "-")
            ax.step(xs, ys, style, where="post", label=r["impl"], linewidth=1.2,
                    color=colors[i % len(colors)])
        ax.set_xscale("log")
        ax.set_xlabel("lateness (us, log)")
        ax.set_ylabel("fraction of timers fired within")
        ax.set_title(f"timer lateness, {workload} workload (tickloop-bench)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        path = os.path.join(outdir, f"latency_{workload}.png")
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(path)

    restart = [r for r in doc.get("results", [])
               if r.get("workload") == "restart" and not r.get("skipped") and r.get("ops")]
    if restart:
        pops = sorted({r["population"] for r in restart})
        impls = list(dict.fromkeys(r["impl"] for r in restart))
        fig, ax = plt.subplots(figsize=(10, 5))
        width = 0.8 / len(pops)
        for j, pop in enumerate(pops):
            vals = []
            for impl in impls:
                hit = [r["ns_per_op"] for r in restart
                       if r["impl"] == impl and r["population"] == pop]
                vals.append(hit[0] if hit else 0)
            ax.bar([i + j * width for i in range(len(impls))], vals, width, label=f"{pop} live")
        ax.set_xticks([i + width * (len(pops) - 1) / 2 for i in range(len(impls))])
        ax.set_xticklabels(impls, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("ns per restart (thread CPU time)")
        ax.set_title("restart a random live timer")
        ax.legend()
        path = os.path.join(outdir, "restart.png")
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def gb_rows(doc):
    """(operation, library, deadlines, n, ns_per_op) from a Google Benchmark
    JSON file; medians when it was run with repetitions, else the iterations."""
    rows = doc.get("benchmarks", [])
    if any(b.get("aggregate_name") == "median" for b in rows):
        rows = [b for b in rows if b.get("aggregate_name") == "median"]
    else:
        rows = [b for b in rows if b.get("run_type", "iteration") == "iteration"]
    for b in rows:
        m = GB_NAME.match(b.get("run_name", b["name"]))
        if not m or "ns_per_op" not in b or b.get("error_occurred"):
            continue
        op, lib, n, equal = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        yield op, lib, "equal" if equal == "1" else "random", n, float(b["ns_per_op"])


def plot_ops(docs, outdir):
    # (op, deadlines) -> lib -> {n: ns}; a later file overrides an earlier one
    series = defaultdict(lambda: defaultdict(dict))
    for doc in docs:
        for op, lib, deadlines, n, ns in gb_rows(doc):
            series[(op, deadlines)][lib][n] = ns
    written = []
    for (op, deadlines), libs in sorted(series.items()):
        fig, ax = plt.subplots(figsize=(8, 5))
        for lib, by_n in sorted(libs.items()):
            points = sorted(by_n.items())
            style = "--" if lib.startswith(("libev", "libuv", "libevent")) else "-"
            ax.plot([p[0] for p in points], [p[1] for p in points], style, marker="o",
                    label=lib)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("live timers N")
        ax.set_ylabel("ns per operation (thread CPU time)")
        ax.set_title(f"{op}, {deadlines} deadlines")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        path = os.path.join(outdir, f"ops_{op}_{deadlines}.png")
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--outdir", default=".", help="where to write the PNGs")
    ap.add_argument("files", nargs="+", help="JSON from tickloop-bench or Google Benchmark")
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
        else:
            print(f"{path}: neither tickloop-bench nor Google Benchmark JSON, skipped",
                  file=sys.stderr)
    if gb_docs:
        written += plot_ops(gb_docs, args.outdir)
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
