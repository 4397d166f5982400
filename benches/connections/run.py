#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run.py: heartbeating connections at scale, the same run for each server.

    benches/connections/run.py [--build build] [--conns 200000] [--scale 0.1]
        [--servers "tickloop-epoll tickloop-io_uring libev libuv"]
        [--rounds 1] [--procs 0] [--window 3] [--out FILE.tsv] [--json FILE]
        [--io-batch "off adaptive:1000 fixed:1000"]

N connections over loopback, held by P server processes on one
SO_REUSEPORT port and opened by P client processes (conn-client), P chosen
from the open-files limit (each process holds at most 90% of it; --procs
overrides). Each connection heartbeats every 30 s and has a 60 s idle
timeout (both times --scale); 1% of them go silent after two heartbeats and
must be closed by their server's idle timer, one timeout after their last
heartbeat.

For each server in turn (rounds interleaved: every server once, then again):
  1. the clients open 10% of the connections and pause; memory is read
     (server RSS from /proc/PID/status, kernel Slab from /proc/meminfo);
  2. they open the other 90%: the setup rate, the servers' CPU per
     accepted connection, and memory again: the per-connection figures are
     the growth over those 90% (fixed costs such as the loop's buffers stay
     out of them);
  3. half an interval later, --window intervals of heartbeats: server CPU
     per heartbeat (the servers' own getrusage; user and system apart),
     heartbeats per wake-up (loop iterations, where the server reports
     them: tickloop and libev), and how long after its send each heartbeat
     restarted its timer;
  4. once every silent connection is past its timeout: idle closes, checked
     by the clients (exactly the silent ones, each one timeout after its
     last heartbeat) and by the servers (close time - timer deadline).

--io-batch takes a list of I/O batching modes, US in microseconds: off,
adaptive:US (tickloop's tl_loop_options.io_batch_adaptive = 1 with
io_batch_ns = US: it gathers only while the load is dense) and fixed:US
(io_batch_ns = US alone: every wait gathers; on io_uring with the kernel's
minimum wait only, epoll ignores it). Each server runs once per mode, as a
row of its own named "SERVER MODE" (e.g. "tickloop-io_uring adaptive:1000",
"libev fixed:1000"), the rounds interleaved over all rows. libev keeps its
defaults in the off and adaptive rows (what a libev user runs) and gathers
with its own ev_set_io_collect_interval(US) in the fixed rows; libuv has no
batching and gets one row, "libuv off". Without --io-batch every server
runs once, unbatched, under its bare name. --io-batch-us US is the older
spelling of --io-batch fixed:US. TICKLOOP_IO_BATCH is removed from the
servers' environment, so that a row runs the mode its name says. For
tickloop rows the table adds the waits that gathered (tl_loop_stats'
io_batched_waits) per second and as a share of the wake-ups.

The Slab growth includes both ends of each loopback connection and the
client's epoll entry: the client is the same for every server, so the
differences between servers are the servers'.
"""

import argparse
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from hist import hist_delta, hist_percentile, idle_histogram

HERE = os.path.dirname(os.path.abspath(__file__))

SERVERS = {
    "tickloop-epoll": ("conn-server-tickloop", ["--io", "epoll"]),
    "tickloop-io_uring": ("conn-server-tickloop", ["--io", "io_uring"]),
    "libev": ("conn-server-libev", []),
    "libuv": ("conn-server-libuv", []),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_kv(line):
    out = {}
    for tok in line.split()[1:]:
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def meminfo_kb(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Proc:
    """A child process whose stdout goes to a file that is polled for lines."""

    def __init__(self, argv, path):
        self.path = path
        self.out = open(path, "w")
        self.p = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT)
        self.pid = self.p.pid
        self.inp = open(path)
        self.partial = ""
        self.all = []  # complete lines so far (read incrementally: the logs grow)

    def lines(self, prefix):
        data = self.partial + self.inp.read()
        parts = data.split("\n")
        self.partial = parts.pop()
        self.all.extend(parts)
        return [l for l in self.all if l.startswith(prefix)]

    def wait_line(self, prefix, timeout, after=0):
        """The first line starting with prefix beyond the first `after` ones."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ls = self.lines(prefix)
            if len(ls) > after:
                return ls[after]
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.path}: exited {self.p.returncode}:\n" + open(self.path).read()[-2000:])
            time.sleep(0.02)
        raise RuntimeError(f"{self.path}: no '{prefix}' line after {timeout} s:\n" + open(self.path).read()[-2000:])

    def signal(self, sig):
        if self.p.poll() is None:
            os.kill(self.pid, sig)

    def stop(self, timeout=60):
        self.signal(signal.SIGTERM)
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.p.wait()
        self.out.close()
        self.inp.close()


def snapshot(procs, prefix, timeout=30):
    """SIGUSR1 to every process, then each one's fresh stats line, parsed."""
    before = [len(p.lines(prefix)) for p in procs]
    for p in procs:
        p.signal(signal.SIGUSR1)
    return [parse_kv(p.wait_line(prefix, timeout, after=b)) for p, b in zip(procs, before)]


def parse_mode(mode):
    """An --io-batch mode: off, adaptive:US or fixed:US (US > 0); exits on
    anything else."""
    kind, _, us = mode.partition(":")
    try:
        ok = (mode == "off") or (kind in ("adaptive", "fixed") and float(us) > 0)
    except ValueError:
        ok = False
    if not ok:
        sys.exit(f"run.py: --io-batch: '{mode}' is not off, adaptive:US or fixed:US (US > 0, microseconds)")
    return mode


def plan_rows(args, servers):
    """(row name, server, mode) for each server and --io-batch mode, in
    the order the rounds run them."""
    if args.io_batch is None:
        return [(s, s, "off") for s in servers]
    rows = []
    for s in servers:
        for mode in args.io_batch:
            if s == "libuv" and mode != "off":
                continue  # no batching: its one row is "libuv off"
            rows.append((f"{s} {mode}", s, mode))
        if s == "libuv" and "off" not in args.io_batch:
            rows.append((f"{s} off", s, "off"))
    return rows


def server_options(args, name, mode):
    """The options every server process of this run gets."""
    common = ["--scale", str(args.scale)]
    if args.leeway_ms and name.startswith("tickloop"):
        common += ["--leeway-ms", str(args.leeway_ms)]
    # libev decides itself: fixed:US is its collect interval, off and
    # adaptive:US its defaults (server_libev.c).
    if mode != "off" and (name.startswith("tickloop") or name == "libev"):
        common += ["--io-batch", mode]
    if args.timers and name.startswith("tickloop"):
        common += ["--timers", args.timers]
    return common


def stats_delta(a, b, key):
    """The sum over the servers of key's growth from snapshot a to b."""
    return sum(int(y.get(key, 0)) - int(x.get(key, 0)) for x, y in zip(a, b))


def connect_all(args, name, mode, tmp, exe, client_exe, servers, clients):
    """Starts the servers and the clients (appended to the lists given),
    opens a tenth of the connections, then the rest, timed; returns the
    setup's figures."""
    n, procs_n, scale = args.conns, args.procs, args.scale
    m = {"slab0": meminfo_kb("Slab")}
    extra = SERVERS[name][1]
    tag = f"{name}-{mode}".replace(":", "_")
    port = 0
    for i in range(procs_n):
        s = Proc([exe, "--port", str(port)] + extra + server_options(args, name, mode),
                 os.path.join(tmp, f"{tag}-s{i}.log"))
        servers.append(s)
        line = s.wait_line("listening on", 30)
        port = int(line.split()[-1])
    time.sleep(0.3)
    m["rss0"] = sum(rss_kb(s.pid) for s in servers)
    counts = [n // procs_n + (1 if i < n % procs_n else 0) for i in range(procs_n)]
    pauses = [max(1, c // 10) for c in counts]
    m["n1"] = n1 = sum(pauses)
    for i in range(procs_n):
        clients.append(Proc([client_exe, "--port", str(port), "--count", str(counts[i]),
                             "--index", str(i), "--scale", str(scale), "--pause-at",
                             str(pauses[i]), "--inflight", str(args.inflight),
                             "--window-ms", str(args.window_ms)],
                            os.path.join(tmp, f"{tag}-c{i}.log")))
    for c in clients:
        c.wait_line("paused", 300)

    def accepted():
        return sum(int(s["accepted"]) for s in snapshot(servers, "stats"))

    end = time.monotonic() + 60
    while accepted() < n1 and time.monotonic() < end:
        time.sleep(0.25)
    time.sleep(0.5)
    m["slab1"] = meminfo_kb("Slab")
    m["rss1"] = sum(rss_kb(s.pid) for s in servers)
    setup_a = snapshot(servers, "stats")
    m["t1"] = time.monotonic()
    for c in clients:
        c.signal(signal.SIGUSR2)
    # The clients say when their connects are done; the servers may still
    # be accepting: the setup ends when they have accepted every one.
    for c in clients:
        c.wait_line("connected-all", 900)
    end = time.monotonic() + 120
    while accepted() < n and time.monotonic() < end:
        time.sleep(0.05)
    m["t2"] = time.monotonic()
    setup_b = snapshot(servers, "stats")
    got = sum(int(s["accepted"]) for s in setup_b)
    if got < n:
        raise RuntimeError(f"only {got} of {n} connections accepted")
    # The servers' own CPU per accepted connection: the setup rate is
    # bounded by the clients and the kernel's handshakes as much as by
    # the server, this is the server's part alone.
    m["setup_cpu_us"] = stats_delta(setup_a, setup_b, "utime_us") + stats_delta(setup_a, setup_b, "stime_us")
    time.sleep(0.3)
    m["slab2"] = meminfo_kb("Slab")
    m["rss2"] = sum(rss_kb(s.pid) for s in servers)
    m["conn_bytes"] = int(snapshot(servers[:1], "stats")[0].get("conn_bytes", 0))
    return m


def heartbeat_window(args, servers, clients, interval):
    """The servers' cost over args.window heartbeat intervals, half an
    interval after the setup."""
    time.sleep(interval / 2)
    a = snapshot(servers, "stats")
    ca = [cpu_ticks(c.pid) for c in clients]
    ta = time.monotonic()
    time.sleep(args.window * interval)
    b = snapshot(servers, "stats")
    cb_ = [cpu_ticks(c.pid) for c in clients]
    tb = time.monotonic()
    w = {"seconds": tb - ta, "client_ticks": sum(cb_) - sum(ca)}
    w["user_us"] = stats_delta(a, b, "utime_us")
    w["cpu_us"] = w["user_us"] + stats_delta(a, b, "stime_us")
    w["hbs"] = stats_delta(a, b, "heartbeats")
    # Context switches: voluntary (the wait sleeps) and involuntary
    # (preempted), from the servers' getrusage.
    w["nvcsw"] = stats_delta(a, b, "nvcsw")
    w["nivcsw"] = stats_delta(a, b, "nivcsw")
    # Loop iterations (wake-ups) where the server reports them.
    w["iters"] = stats_delta(a, b, "iterations")
    # Waits that gathered I/O, where the server reports them (tickloop).
    w["batched"] = stats_delta(a, b, "io_batched_waits") if "io_batched_waits" in b[0] else None
    restart = {}
    restart_max = 0
    for x, y in zip(a, b):
        d, mx = hist_delta(x, y, "restart_hist")
        for i, c in d.items():
            restart[i] = restart.get(i, 0) + c
        restart_max = max(restart_max, mx)
    w["restart"], w["restart_max"] = restart, restart_max
    return w


def result_row(args, row, round_no, m, w, fs, fc):
    """One round of one row (server and mode): the row of the tables and the JSON."""
    label, name, mode = row
    n, n1 = args.conns, m["n1"]
    t1, t2, hbs, iters, cpu_us, user_us = m["t1"], m["t2"], w["hbs"], w["iters"], w["cpu_us"], w["user_us"]
    restart, restart_max = w["restart"], w["restart_max"]
    idle, idle_max = idle_histogram(fs)

    def csum(k):
        return sum(int(c[k]) for c in fc)

    def ssum(k):
        return sum(int(s[k]) for s in fs)

    return {
        "round": round_no,
        "server": label,
        "loop": name,
        "io_batch": mode,
        "conns": n,
        "procs": args.procs,
        "scale": args.scale,
        "setup_s": t2 - t1,
        "setup_rate": (n - n1) / (t2 - t1),
        "setup_cpu_us_per_conn": m["setup_cpu_us"] / (n - n1),
        "conn_bytes": m["conn_bytes"],
        "rss_per_conn": (m["rss2"] - m["rss1"]) * 1024 / (n - n1),
        "rss_total_per_conn": (m["rss2"] - m["rss0"]) * 1024 / n,
        "slab_per_conn": (m["slab2"] - m["slab1"]) * 1024 / (n - n1),
        "slab_total_per_conn": (m["slab2"] - m["slab0"]) * 1024 / n,
        "hb_window": hbs,
        "hb_rate": hbs / w["seconds"],
        "cpu_us_per_hb": cpu_us / hbs if hbs else 0,
        "user_us_per_hb": user_us / hbs if hbs else 0,
        "sys_us_per_hb": (cpu_us - user_us) / hbs if hbs else 0,
        "hb_per_wakeup": hbs / iters if iters else 0,
        "batched_per_s": None if w["batched"] is None else w["batched"] / w["seconds"],
        "batched_share": None if w["batched"] is None else (w["batched"] / iters if iters else 0),
        "vcsw_per_khb": w["nvcsw"] * 1000 / hbs if hbs else 0,
        "ivcsw_per_khb": w["nivcsw"] * 1000 / hbs if hbs else 0,
        "server_cores": cpu_us / 1e6 / w["seconds"],
        "client_cores": w["client_ticks"] / os.sysconf("SC_CLK_TCK") / w["seconds"],
        "restart_p50_us": hist_percentile(restart, restart_max, 0.5) / 1e3,
        "restart_p99_us": hist_percentile(restart, restart_max, 0.99) / 1e3,
        "restart_max_us": restart_max / 1e3,
        "silent": csum("silent"),
        "idle_closed": ssum("idle_closed"),
        "idle_early": ssum("idle_early"),
        "idle_late_p99_us": hist_percentile(idle, idle_max, 0.99) / 1e3,
        "idle_late_max_us": idle_max / 1e3,
        "silent_ok": csum("silent_ok"),
        "silent_early": csum("silent_early"),
        "silent_late": csum("silent_late"),
        "silent_overdue": csum("silent_overdue"),
        "wrong_closed": csum("wrong_closed"),
        "client_close_min_ms": min(int(c["close_min_us"]) for c in fc) / 1e3,
        "client_close_max_ms": max(int(c["close_max_us"]) for c in fc) / 1e3,
        "connect_failed": csum("connect_failed"),
        "send_errors": csum("send_errors"),
        "server_errors": ssum("errors") + ssum("accept_errors"),
        "peer_closed": ssum("peer_closed"),
    }


def run_one(args, row, tmp, round_no):
    label, name, mode = row
    exe = os.path.join(args.build, "benches", "connections", SERVERS[name][0])
    if not os.access(exe, os.X_OK):
        log(f"run.py: {label}: {exe} not built, skipped")
        return None
    client_exe = os.path.join(args.build, "benches", "connections", "conn-client")
    interval = 30.0 * args.scale
    timeout = 60.0 * args.scale
    servers, clients = [], []
    try:
        m = connect_all(args, name, mode, tmp, exe, client_exe, servers, clients)
        w = heartbeat_window(args, servers, clients, interval)
        # Every silent connection is past its timeout: the last one opened
        # (at t2) went silent (silent-after - 1) intervals later.
        wait_until = m["t2"] + interval + timeout + args.window_ms / 1000 + 1.0
        while time.monotonic() < wait_until:
            time.sleep(0.2)
        fs = snapshot(servers, "stats")
        fc = snapshot(clients, "cstats")
        return result_row(args, row, round_no, m, w, fs, fc)
    finally:
        for c in clients:
            c.stop()
        for s in servers:
            s.stop()
        time.sleep(2)  # let the kernel free the sockets before the next server


COLUMNS = [
    ("server", "server", "{}"),
    ("setup_rate", "setup conn/s", "{:,.0f}"),
    ("setup_cpu_us_per_conn", "setup CPU us/conn", "{:.1f}"),
    ("rss_per_conn", "user B/conn", "{:.0f}"),
    ("conn_bytes", "caller's B/conn", "{}"),
    ("slab_per_conn", "Slab B/conn", "{:.0f}"),
    ("cpu_us_per_hb", "CPU us/heartbeat", "{:.2f}"),
    ("user_us_per_hb", "user us", "{:.2f}"),
    ("sys_us_per_hb", "sys us", "{:.2f}"),
    ("hb_per_wakeup", "heartbeats/wake-up", "{:.1f}"),
    ("batched_per_s", "batched waits/s", "{:,.0f}"),
    ("batched_share", "batched/wake-up", "{:.2f}"),
    ("vcsw_per_khb", "sleeps/1k hb", "{:.0f}"),
    ("ivcsw_per_khb", "preempted/1k hb", "{:.0f}"),
    ("hb_rate", "heartbeats/s", "{:,.0f}"),
    ("restart_p50_us", "restart p50 us", "{:.0f}"),
    ("restart_p99_us", "restart p99 us", "{:.0f}"),
    ("idle_closed", "idle closes", "{}"),
    ("silent", "silent", "{}"),
    ("wrong_closed", "closed wrongly", "{}"),
    ("silent_overdue", "missed", "{}"),
    ("idle_late_max_us", "idle close late max us", "{:.0f}"),
    ("client_close_max_ms", "client-seen max ms", "{:.1f}"),
]


def cell(row, k, f):
    """A figure as the tables print it: "-" where the server does not
    report it (libuv's wake-ups, batched waits outside tickloop)."""
    v = row[k]
    if v is None or (k == "hb_per_wakeup" and not v):
        return "-"
    return f.format(v)


def median_rows(results, servers):
    rows = []
    for s in servers:
        rs = [r for r in results if r and r["server"] == s]
        if not rs:
            continue
        row = dict(rs[0])
        for k, v in rs[0].items():
            if isinstance(v, (int, float)) and k not in ("round",) and all(r[k] is not None for r in rs):
                vals = [r[k] for r in rs]
                if k in ("wrong_closed", "silent_overdue", "silent_early", "silent_late",
                         "idle_early", "idle_late_max_us", "client_close_max_ms", "restart_max_us",
                         "connect_failed", "send_errors", "server_errors"):
                    row[k] = max(vals)  # the worst round, for the checks
                elif k == "client_close_min_ms":
                    row[k] = min(vals)
                else:
                    row[k] = statistics.median(vals)
        row["rounds"] = len(rs)
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--conns", type=int, default=200000)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--servers", default="tickloop-epoll tickloop-io_uring libev libuv")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--procs", type=int, default=0, help="server (and client) processes; 0: from the open-files limit")
    ap.add_argument("--window", type=float, default=3, help="heartbeat intervals measured")
    ap.add_argument("--window-ms", type=float, default=100,
                    help="how late after its timeout a silent connection's close may be seen by the client")
    ap.add_argument("--inflight", type=int, default=256)
    ap.add_argument("--leeway-ms", type=float, default=0)
    ap.add_argument("--io-batch", default=None,
                    help='I/O batching modes, each a row per server: "off adaptive:US fixed:US" '
                    "(US in microseconds; see above)")
    ap.add_argument("--io-batch-us", type=float, default=0,
                    help="the older spelling of --io-batch fixed:US")
    ap.add_argument("--timers", default=None)
    ap.add_argument("--out", help="TSV of the median rows (plot_connections.py)")
    ap.add_argument("--json", help="every round's results")
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    per_proc = int((hard - 64) * 0.9)
    if args.procs <= 0:
        args.procs = max(1, math.ceil(args.conns / per_proc))
    if args.conns / args.procs > hard - 64:
        sys.exit(f"run.py: {args.conns} connections over {args.procs} processes exceed the open-files limit {hard}")
    if args.procs > 254:
        sys.exit("run.py: at most 254 client processes (one 127.x.0.0/16 each)")
    servers = args.servers.split()
    for s in servers:
        if s not in SERVERS:
            sys.exit(f"run.py: unknown server {s}; known: {' '.join(SERVERS)}")
    if args.io_batch_us:
        if args.io_batch is not None:
            sys.exit("run.py: --io-batch-us and --io-batch: give one")
        args.io_batch = f"fixed:{args.io_batch_us:g}"
    if args.io_batch is not None:
        args.io_batch = [parse_mode(m) for m in args.io_batch.split()]
        if not args.io_batch:
            sys.exit("run.py: --io-batch: no mode given")
    rows_planned = plan_rows(args, servers)
    if os.environ.pop("TICKLOOP_IO_BATCH", None) is not None:
        log("run.py: TICKLOOP_IO_BATCH removed from the servers' environment (use --io-batch)")
    log(f"run.py: {args.conns} connections, {args.procs} server + {args.procs} client processes "
        f"(open files limit {hard}), heartbeat {30 * args.scale:g} s, idle timeout {60 * args.scale:g} s")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, args.rounds + 1):
            for row in rows_planned:
                res = run_one(args, row, tmp, r)
                results.append(res)
                if res:
                    log(f"round {r} {row[0]}: " + ", ".join(
                        f"{h} " + cell(res, k, f) for k, h, f in COLUMNS[1:]))
    rows = median_rows(results, [row[0] for row in rows_planned])
    print(f"\n{args.conns} connections, {args.procs}+{args.procs} processes, scale {args.scale}, "
          f"rounds {args.rounds} (medians; checks: worst round)"
          + (f"; --io-batch \"{' '.join(args.io_batch)}\"" if args.io_batch else ""))
    print("| " + " | ".join(h for _, h, _ in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        # A figure a server does not report (libuv's wake-ups) prints as "-".
        print("| " + " | ".join(cell(row, k, f) for k, _, f in COLUMNS) + " |")
    if args.out:
        keys = list(rows[0].keys()) if rows else []
        with open(args.out, "w") as f:
            f.write("\t".join(keys) + "\n")
            for row in rows:
                f.write("\t".join("" if row[k] is None else str(row[k]) for k in keys) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
