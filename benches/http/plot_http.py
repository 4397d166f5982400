#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot_http.py: charts the TSV that benches/http/run.sh --out writes.

Usage: plot_http.py TABLE.tsv OUT.png [BASE]
Three panels against the connection count: requests per second, server
CPU per request and p99 latency, each as a ratio to BASE's (a server of the
table, libev by default, e.g. asio-epoll) at the same connection count
(absolute values when the table has no such row), one
bar per server (at most six, one colour each; the legend sits below). Needs matplotlib (Debian's
python3-matplotlib; run it with /usr/bin/python3 when another python3 comes
first in PATH).
"""

import csv
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_http.py needs matplotlib (apt-get install python3-matplotlib)")


COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["req/s"] != "-"]
    conns = sorted({int(r["conns"]) for r in rows})
    servers = list(dict.fromkeys(r["server"] for r in rows))
    if len(servers) > len(COLOURS):
        sys.exit(f"plot_http.py: at most {len(COLOURS)} servers per chart (got {len(servers)})")
    value = {(int(r["conns"]), r["server"]): r for r in rows}
    # The figures differ by an order of magnitude between 1 connection and
    # many; against one server at the same connection count they share one
    # scale.
    want = sys.argv[3] if len(sys.argv) == 4 else "libev"
    base = want if want in servers else None
    panels = (("req/s", "requests/s", "higher is better"),
              ("cpu_us_per_req", "server CPU per request", "lower is better"),
              ("p99_us", "p99 latency", "lower is better"))
    fig, axes = plt.subplots(1, len(panels), figsize=(14, 4.4))
    width = 0.8 / len(servers)
    for ax, (key, name, better) in zip(axes, panels):
        for i, s in enumerate(servers):
            xs, ys = [], []
            for j, c in enumerate(conns):
                if (c, s) in value and (not base or (c, base) in value):
                    v = float(value[(c, s)][key])
                    xs.append(j + i * width - 0.4 + width / 2)
                    ys.append(v / float(value[(c, base)][key]) if base else v)
            ax.bar(xs, ys, width, label=s, color=COLOURS[i])
        if base:
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
            ax.set_title(f"{name} / {base}'s ({better})", fontsize=10)
        else:
            ax.set_title(f"{name} ({better})", fontsize=10)
        ax.set_xticks(range(len(conns)))
        ax.set_xticklabels([f"{c} conn{'s' if c > 1 else ''}" for c in conns])
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(servers), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
