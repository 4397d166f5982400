#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""report.py: the tables, the goals and the plot of run.sh's results.

Reads the "peers key=value ..." lines of bench-timer-peers, Peers.java and
peers.go (several rounds of each library), takes per library the median of
every figure over the rounds and its range (min-max), and writes:
- a Markdown file: the delayed-tasks tables (CPU per phase, bytes per timer,
  lateness, wake-ups per 1 ms tick that holds a due timer), the heartbeat
  table (CPU per restart, bytes per timer), the ratios tickloop/Netty (1 ms
  tick) and tickloop/Go, and each goal with its figure and whether it holds;
- a PNG with one labelled panel per figure.

usage: report.py [--machine FILE] --md OUT.md --png OUT.png RESULTS...
"""
import argparse
import statistics
import sys

ORDER = ["heap2", "heap4", "wheel", "hwheel", "heap2@1ms", "heap4@1ms", "wheel@1ms",
         "hwheel@1ms", "libev", "libuv", "netty-1ms", "netty-100ms", "go-p1", "go-default"]
TICKLOOP = [lib for lib in ORDER[:8]]
NAMES = {
    "heap2": "tickloop heap2", "heap4": "tickloop heap4", "wheel": "tickloop wheel",
    "hwheel": "tickloop hwheel", "heap2@1ms": "heap2 + 1 ms collect",
    "heap4@1ms": "heap4 + 1 ms collect", "wheel@1ms": "wheel + 1 ms collect",
    "hwheel@1ms": "hwheel + 1 ms collect", "libev": "libev", "libuv": "libuv",
    "netty-1ms": "Netty HWT 1 ms tick", "netty-100ms": "Netty HWT 100 ms (default)",
    "go-p1": "Go GOMAXPROCS=1", "go-default": "Go GOMAXPROCS default",
}
NETTY, GO = "netty-1ms", ["go-p1", "go-default"]
PEERS = [NETTY, "netty-100ms"] + GO


def invalid(row):
    """Why a run does not count, or None. The programs print their line before
    they check it; a delayed run whose cancel phase outlasted the first
    deadline (a machine stalled for seconds) or whose fire count is off
    failed its check and has no exact counts."""
    if row["workload"] != "delayed":
        return None
    if int(row["cancel_margin_ns"]) <= 0:
        return "cancel phase ended after the first deadline"
    if row["fired"] != "100000":
        return "fired " + row["fired"]
    return None


def parse(paths):
    runs, dropped = {}, []
    for path in paths:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if not fields or fields[0] != "peers":
                    continue
                row = dict(kv.split("=", 1) for kv in fields[1:])
                why = invalid(row)
                if why:
                    dropped.append("%s %s: %s" % (row["workload"], row["lib"], why))
                    continue
                runs.setdefault((row["workload"], row["lib"]), []).append(row)
    return runs, dropped


class Stat:
    """Median and range of one figure over the rounds; None where it does not apply."""

    def __init__(self, values):
        nums = [float(v) for v in values if v not in ("-", None)]
        self.n = len(nums)
        self.med = statistics.median(nums) if nums else None
        self.lo = min(nums) if nums else None
        self.hi = max(nums) if nums else None

    def fmt(self, scale=1.0, digits=0, rng=True):
        if self.med is None:
            return "-"
        f = "{:,.%df}" % digits
        s = f.format(self.med / scale)
        if rng and self.n > 1:
            s += " (" + f.format(self.lo / scale) + "-" + f.format(self.hi / scale) + ")"
        return s


def stat(runs, workload, lib, key, derive=None):
    rows = runs.get((workload, lib), [])
    if derive:
        return Stat([derive(r) for r in rows])
    return Stat([r.get(key) for r in rows])


def per_restart(r):
    return float(r["restart_cpu_ns"]) / float(r["restarts"])


def per_due_tick(r):
    return float(r["wakeups"]) / float(r["due_ticks"])


def ratio(a, b):
    if a.med is None or b.med is None or b.med == 0:
        return None
    return a.med / b.med


def fmt_ratio(x):
    return "-" if x is None else "%.2f" % x


def libs_present(runs, workload):
    return [lib for lib in ORDER if (workload, lib) in runs] + sorted(
        {lib for (w, lib) in runs if w == workload and lib not in ORDER})


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def markdown(runs, dropped, machine):
    md = []
    if machine:
        md.append("Machine and commit:\n\n```\n" + machine.strip() + "\n```\n")
    rounds = max((len(v) for v in runs.values()), default=0)
    md.append("Medians of %d rounds, range (min-max) in parentheses. Ratios are medians over "
              "medians; below 1, tickloop uses less.\n" % rounds)
    if dropped:
        md.append("Runs left out (their check failed): " + "; ".join(dropped) + ".\n")

    d = "delayed"
    nt = stat(runs, d, NETTY, "total_cpu_ns")
    gos = [stat(runs, d, g, "total_cpu_ns") for g in GO]
    rows = []
    for lib in libs_present(runs, d):
        s = lambda k: stat(runs, d, lib, k)
        tot = s("total_cpu_ns")
        is_tl = lib in TICKLOOP
        rows.append([NAMES.get(lib, lib), s("schedule_cpu_ns").fmt(1e6), s("cancel_cpu_ns").fmt(1e6),
                     s("fire_cpu_ns").fmt(1e6), tot.fmt(1e6),
                     fmt_ratio(ratio(tot, nt)) if is_tl else "",
                     fmt_ratio(ratio(tot, gos[0])) if is_tl else "",
                     fmt_ratio(ratio(tot, gos[1])) if is_tl else "",
                     s("bytes_per_timer").fmt()])
    md.append("### Delayed tasks: CPU and memory\n\n1,000,000 timers of 3.1-5 s, 900,000 "
              "cancelled in random order, 100,000 fire. CPU in ms of the whole process "
              "(all threads).\n")
    md.append(table(["library", "schedule ms", "cancel ms", "fire ms", "total ms",
                     "/Netty 1 ms", "/Go P=1", "/Go default", "bytes/timer"], rows))

    rows = []
    for lib in libs_present(runs, d):
        s = lambda k: stat(runs, d, lib, k)
        rows.append([NAMES.get(lib, lib), s("late_p50_ns").fmt(1e3), s("late_p99_ns").fmt(1e3),
                     s("late_max_ns").fmt(1e3), s("early").fmt(rng=False), s("wakeups").fmt(),
                     s("due_ticks").fmt(rng=False),
                     stat(runs, d, lib, None, per_due_tick).fmt(1, 2),
                     s("loop_timer_wakeups").fmt(), s("ticks").fmt(rng=False)])
    md.append("\n### Delayed tasks: lateness and wake-ups (fire phase)\n\nLateness in us "
              "(fire time minus the library's deadline, CLOCK_MONOTONIC). Wake-ups: the "
              "process's voluntary context switches over the fire phase (every thread); due "
              "ticks: 1 ms ticks holding a surviving timer's deadline; loop wake-ups: tickloop's "
              "timer_wakeups; ticks: ticks elapsed over the fire phase, for the wheels.\n")
    md.append(table(["library", "p50 us", "p99 us", "max us", "early", "wake-ups", "due ticks",
                     "wake-ups/due tick", "loop wake-ups", "ticks"], rows))

    h = "heartbeat"
    nh = stat(runs, h, NETTY, None, per_restart)
    ghs = [stat(runs, h, g, None, per_restart) for g in GO]
    nb = stat(runs, h, NETTY, "bytes_per_timer")
    gbs = [stat(runs, h, g, "bytes_per_timer") for g in GO]
    rows = []
    for lib in libs_present(runs, h):
        pr = stat(runs, h, lib, None, per_restart)
        b = stat(runs, h, lib, "bytes_per_timer")
        is_tl = lib in TICKLOOP
        rows.append([NAMES.get(lib, lib), pr.fmt(1, 0),
                     fmt_ratio(ratio(pr, nh)) if is_tl else "",
                     fmt_ratio(ratio(pr, ghs[0])) if is_tl else "",
                     fmt_ratio(ratio(pr, ghs[1])) if is_tl else "",
                     b.fmt(), fmt_ratio(ratio(b, nb)) if is_tl else "",
                     fmt_ratio(ratio(b, gbs[0])) if is_tl else "",
                     stat(runs, h, lib, "schedule_cpu_ns").fmt(1e6),
                     stat(runs, h, lib, "fired").fmt()])
    md.append("\n### Heartbeats\n\n1,000,000 timers of 30 s, then 10,000,000 restarts of "
              "random ones. CPU per restart: whole-process CPU of the restart phase over the "
              "restarts (Netty: until its worker has caught up). Bytes per timer: RSS growth "
              "over the schedule phase over 1e6. fired: timers left 30 s without a restart "
              "(only when the restart phase outlasts 30 s).\n")
    md.append(table(["library", "ns/restart", "/Netty 1 ms", "/Go P=1", "/Go default",
                     "bytes/timer", "/Netty", "/Go P=1", "schedule ms", "fired"], rows))

    md.append("\n### Goals\n")
    md += goals(runs)
    return "\n".join(md) + "\n"


def goals(runs):
    """One table per goal: the figure, and whether it is within the limit."""
    d, h = "delayed", "heartbeat"

    def cell(value, limit):
        if value is None:
            return "-"
        return "%.2f %s" % (value, "holds" if value <= limit else "**fails**")

    out = []
    peers = [NETTY] + GO
    rows = []
    for lib in ["wheel", "hwheel", "heap2@1ms", "heap4@1ms", "heap2", "heap4", "wheel@1ms",
                "hwheel@1ms"]:
        tot = stat(runs, d, lib, "total_cpu_ns")
        rows.append([NAMES[lib]] + [cell(ratio(tot, stat(runs, d, p, "total_cpu_ns")), 0.35)
                                    for p in peers])
    out.append("Delayed tasks, total CPU over the peer's (goal: at most 0.35 for the wheels "
               "with their defaults and the heaps with a 1 ms collect interval; the other rows "
               "for reference):\n")
    out.append(table(["tickloop"] + ["/ " + NAMES[p] for p in peers], rows))

    rows = []
    for lib in ["wheel", "hwheel", "heap2@1ms", "heap4@1ms", "wheel@1ms", "hwheel@1ms"]:
        proc = stat(runs, d, lib, None, per_due_tick)
        loop = stat(runs, d, lib, None,
                    lambda r: float(r["loop_timer_wakeups"]) / float(r["due_ticks"]))
        rows.append([NAMES[lib], cell(proc.med, 1.1), cell(loop.med, 1.1)])
    out.append("\nDelayed tasks, wake-ups per 1 ms tick that holds a due timer (goal: at most "
               "1.1):\n")
    out.append(table(["tickloop", "context switches / due tick", "loop timer_wakeups / due tick"],
                     rows))

    rows = []
    for lib in ["wheel", "hwheel", "wheel@1ms", "hwheel@1ms"]:
        p99 = stat(runs, d, lib, "late_p99_ns")
        rows.append([NAMES[lib], cell(None if p99.med is None else p99.med / 1e6, 1.2)])
    out.append("\nDelayed tasks, the wheels' lateness p99 in ms (goal: at most one tick + 200 us "
               "= 1.2 ms; the collect-interval rows may add their 1 ms leeway):\n")
    out.append(table(["tickloop", "p99 ms"], rows))

    rows = []
    for lib in TICKLOOP[:4]:
        pr = stat(runs, h, lib, None, per_restart)
        row = [NAMES[lib], cell(ratio(pr, stat(runs, h, NETTY, None, per_restart)), 0.1)]
        row += [cell(ratio(pr, stat(runs, h, g, None, per_restart)), 0.3) for g in GO]
        b = stat(runs, h, lib, "bytes_per_timer")
        row += [cell(ratio(b, stat(runs, h, p, "bytes_per_timer")), 0.6) for p in peers]
        rows.append(row)
    out.append("\nHeartbeats, CPU per restart over the peer's (goal: at most 0.1 of Netty's, 0.3 "
               "of Go's) and bytes per timer over the peer's (goal: at most 0.6):\n")
    out.append(table(["tickloop", "CPU / Netty 1 ms"] + ["CPU / " + NAMES[g] for g in GO] +
                     ["bytes / " + NAMES[p] for p in peers], rows))
    return out


# ---------------------------------------------------------------------------
# The plot
# ---------------------------------------------------------------------------

class Panels:
    """What the six panels of the plot share: the libraries shown (one row
    each), their medians with ranges, and the axes' common finish."""

    COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]

    def __init__(self, runs, libs):
        self.runs, self.libs = runs, libs
        self.labels = [NAMES.get(lib, lib) for lib in libs]
        self.y = list(range(len(libs)))

    def meds(self, workload, key=None, derive=None, scale=1.0):
        out = []
        for lib in self.libs:
            s = stat(self.runs, workload, lib, key, derive)
            out.append(s)
        m = [(s.med / scale) if s.med is not None else 0 for s in out]
        err = [[(s.med - s.lo) / scale if s.med is not None else 0 for s in out],
               [(s.hi - s.med) / scale if s.med is not None else 0 for s in out]]
        return m, err

    def finish(self, ax, title, xlabel, legend=True, log=False, ncol=3):
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
        ax.set_title(title, loc="left", fontweight="bold")
        ax.set_xlabel(xlabel)
        ax.set_yticks(self.y)
        ax.set_yticklabels(self.labels)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
        if log:
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
            ax.xaxis.set_minor_formatter(NullFormatter())
        if legend:
            ax.legend(loc="lower left", bbox_to_anchor=(0, 1.06), ncol=ncol, frameon=False)


def plot_delayed_cpu(p, ax):
    """(a) delayed: CPU per phase, stacked."""
    d, y, colors = "delayed", p.y, Panels.COLORS
    left = [0.0] * len(p.libs)
    for i, (key, name) in enumerate([("schedule_cpu_ns", "schedule"),
                                     ("cancel_cpu_ns", "cancel"), ("fire_cpu_ns", "fire")]):
        m, _ = p.meds(d, key, scale=1e6)
        ax.barh(y, m, left=left, color=colors[i], label=name)
        left = [a + b for a, b in zip(left, m)]
    m, err = p.meds(d, "total_cpu_ns", scale=1e6)
    ax.errorbar(m, y, xerr=err, fmt="none", ecolor="black", capsize=2, label="total: range")
    p.finish(ax, "(a) Delayed tasks: CPU per phase",
             "process CPU, ms (median; whisker: range of the total)")


def plot_delayed_ratio(p, ax):
    """(b) delayed: total CPU relative to Netty 1 ms and Go, for the
    libraries that are not one of those peers."""
    d, y, colors = "delayed", p.y, Panels.COLORS
    width = 0.27
    m, _ = p.meds(d, "total_cpu_ns")
    for i, peer in enumerate([NETTY] + GO):
        ref = stat(p.runs, d, peer, "total_cpu_ns").med
        own = [(v, x) for v, x, lib in zip(y, m, p.libs) if lib not in PEERS]
        if ref:
            pos = [v + (i - 1) * width for v, _ in own]
            vals = [x / ref for _, x in own]
            ax.barh(pos, vals, height=width, color=colors[i], label="/ " + NAMES[peer])
    ax.axvline(0.35, color="black", linestyle="--", linewidth=1, label="goal 0.35")
    p.finish(ax, "(b) Delayed tasks: total CPU over the peer's",
             "ratio of the medians (log scale)", log=True, ncol=2)
    ax.set_xticks([0.05, 0.1, 0.2, 0.35, 0.5, 1, 2])


def plot_delayed_lateness(p, ax):
    """(c) delayed: lateness."""
    from matplotlib.ticker import LogLocator
    d, y, colors = "delayed", p.y, Panels.COLORS
    width = 0.4
    for i, (key, name) in enumerate([("late_p50_ns", "p50"), ("late_p99_ns", "p99")]):
        m, err = p.meds(d, key, scale=1e3)
        ax.barh([v + (i - 0.5) * width for v in y], m, height=width, xerr=err,
                color=colors[i], label=name + " (whisker: range)", capsize=2)
    ax.axvline(1200, color="black", linestyle="--", linewidth=1, label="1 tick + 200 us")
    p.finish(ax, "(c) Delayed tasks: lateness", "us after the deadline, 100,000 fires (log scale)",
             log=True)
    ax.xaxis.set_major_locator(LogLocator(base=10))  # decades only: labels up to 6 digits


def plot_rest(p, axes):
    """(d) delayed: wake-ups per due tick; (e) heartbeat: CPU per restart;
    (f) bytes per timer, both workloads."""
    d, h, y, colors = "delayed", "heartbeat", p.y, Panels.COLORS
    ax = axes[1][1]
    m, err = p.meds(d, derive=per_due_tick)
    ax.barh(y, m, xerr=err, color=colors[3], capsize=2, label="voluntary context switches")
    ax.axvline(1.1, color="black", linestyle="--", linewidth=1, label="goal 1.1")
    p.finish(ax, "(d) Delayed tasks: wake-ups per due tick",
             "fire phase: context switches / 1 ms ticks holding a deadline (log scale)", log=True)

    ax = axes[2][0]
    m, err = p.meds(h, derive=per_restart)
    ax.barh(y, m, xerr=err, color=colors[4], capsize=2, label="process CPU / restart")
    p.finish(ax, "(e) Heartbeats: CPU per restart",
             "process CPU, ns per restart (1e6 timers, 1e7 restarts; log scale)", log=True)

    ax = axes[2][1]
    width = 0.4
    for i, (w, name) in enumerate([(d, "delayed tasks"), (h, "heartbeats")]):
        m, err = p.meds(w, "bytes_per_timer")
        ax.barh([v + (i - 0.5) * width for v in y], m, height=width, xerr=err,
                color=colors[i + 4], capsize=2, label=name)
    p.finish(ax, "(f) Bytes per timer", "RSS growth over the schedule phase / 1e6 timers")


def plot(runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10})
    libs = [lib for lib in ORDER if ("delayed", lib) in runs or ("heartbeat", lib) in runs]
    p = Panels(runs, libs)
    fig, axes = plt.subplots(3, 2, figsize=(15, 15.5), constrained_layout=True)
    plot_delayed_cpu(p, axes[0][0])
    plot_delayed_ratio(p, axes[0][1])
    plot_delayed_lateness(p, axes[1][0])
    plot_rest(p, axes)
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--machine")
    ap.add_argument("--md", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("results", nargs="+")
    args = ap.parse_args()
    runs, dropped = parse(args.results)
    if not runs:
        print("no results in " + " ".join(args.results), file=sys.stderr)
        return 1
    machine = open(args.machine).read() if args.machine else ""
    with open(args.md, "w") as f:
        f.write(markdown(runs, dropped, machine))
    plot(runs, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
