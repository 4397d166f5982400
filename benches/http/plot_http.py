#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""plot_http.py: charts the TSV that benches/http/run.sh --out writes.

Usage: plot_http.py TABLE.tsv OUT.png
Two panels against the connection count: requests per second, and server
CPU microseconds per request, one bar per server. Needs matplotlib (Debian's
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


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    conns = sorted({int(r["conns"]) for r in rows})
    servers = list(dict.fromkeys(r["server"] for r in rows))
    value = {(int(r["conns"]), r["server"]): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(servers)
    for ax, key, title in ((axes[0], "req/s", "requests/s (higher is better)"),
                           (axes[1], "cpu_us_per_req", "server CPU us/request (lower is better)")):
        for i, s in enumerate(servers):
            xs, ys = [], []
            for j, c in enumerate(conns):
                if (c, s) in value:
                    xs.append(j + i * width - 0.4 + width / 2)
                    ys.append(float(value[(c, s)][key]))
            ax.bar(xs, ys, width, label=s)
        ax.set_xticks(range(len(conns)))
        ax.set_xticklabels([f"{c} conns" for c in conns])
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
