#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot_connections.py: charts the TSV that benches/connections/run.py --out writes.

Usage: plot_connections.py TABLE.tsv OUT.png [TITLE]
Four panels, one bar per server: server CPU per heartbeat, server user
memory per connection (with the caller's own struct marked), kernel Slab
per connection, and heartbeat-to-restart latency (p50 and p99). Needs
matplotlib (Debian's python3-matplotlib; run it with /usr/bin/python3 when
another python3 comes first in PATH).
"""

import csv
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plot_connections.py needs matplotlib (apt-get install python3-matplotlib)")

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    servers = [r["server"] for r in rows]
    colours = [COLOURS[i % len(COLOURS)] for i in range(len(rows))]
    x = range(len(rows))
    fig, axes = plt.subplots(1, 4, figsize=(15, 4.2))

    def bars(ax, key, title, fmt):
        vals = [float(r[key]) for r in rows]
        ax.bar(x, vals, 0.7, color=colours)
        for i, v in enumerate(vals):
            ax.annotate(fmt.format(v), (i, v), ha="center", va="bottom", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(list(x))
        ax.set_xticklabels(servers, rotation=25, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.15)

    bars(axes[0], "cpu_us_per_hb", "server CPU us per heartbeat\n(lower is better)", "{:.2f}")
    bars(axes[1], "rss_per_conn", "server user memory, bytes/connection\n(RSS growth; black: caller's struct)", "{:.0f}")
    for i, r in enumerate(rows):
        cb = float(r["conn_bytes"])
        axes[1].plot([i - 0.35, i + 0.35], [cb, cb], color="black", linewidth=2)
    bars(axes[2], "slab_per_conn", "kernel Slab, bytes/connection\n(both ends of loopback)", "{:.0f}")
    p50 = [float(r["restart_p50_us"]) for r in rows]
    p99 = [float(r["restart_p99_us"]) for r in rows]
    ax = axes[3]
    w = 0.38
    ax.bar([i - w / 2 for i in x], p50, w, color=colours, label="p50")
    ax.bar([i + w / 2 for i in x], p99, w, color=colours, alpha=0.45, hatch="//", label="p99")
    ax.set_yscale("log")
    ax.set_ylim(bottom=1)
    ax.set_title("heartbeat sent -> timer restarted, us\n(solid p50, hatched p99; log scale)", fontsize=10)
    ax.set_xticks(list(x))
    ax.set_xticklabels(servers, rotation=25, ha="right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    title = sys.argv[3] if len(sys.argv) == 4 else "heartbeating connections"
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
