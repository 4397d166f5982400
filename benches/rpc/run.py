#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run.py: the seeds' RPC client (Dubbo's DefaultFuture) on each library.

    benches/rpc/run.py --build DIR [--conns 64] [--inflight 16] [--seconds 5]
        [--rounds 3] [--json FILE] [--clients "tickloop-epoll-heap4 ... asio"]
        [--server-threads 1]

One server (rpc-server: tickloop, epoll, heap4; the same for every client)
answers each 16-byte request after a delay it draws for it: 99% uniform in
0-2 ms, 1% after 300 ms, those marked late. Each client keeps --inflight
requests outstanding on each of --conns connections, every request with a
100 ms timeout started at its send and cancelled by its answer (a start
and a cancel per request, nearly none firing): exactly the late requests
must time out, none before its 100 ms, and an answer after its timeout is
dropped. Clients: tickloop on epoll and io_uring with heap4 and wheel,
libev, libuv, and Asio where libasio-dev is present, each in its own idiom
(rpc_common.h; client_*.c).

The clients run one at a time, rounds interleaved (every client once, then
again). Per client, the medians over rounds of: client CPU (user + system,
getrusage) per finished request over the --seconds window, requests per
second, timeouts expected (late answers seen), fired and early, and the
round-trip p50 and p99 of the answers in time. The table goes to stdout;
--json writes {"rows": [{"client": ..., "cpu_us_per_request": ...,
"requests_per_s": ..., "timeouts_expected": ..., "timeouts_fired": ...,
"timeouts_early": ..., "p50_rtt_us": ..., "p99_rtt_us": ...}, ...]}.
The server shares the machine with the client: requests/s is bounded by
it, and CPU per request is the figure to compare.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

CLIENTS = {
    "tickloop-epoll-heap4": ("rpc-client-tickloop", ["--io", "epoll", "--timers", "heap4"]),
    "tickloop-epoll-wheel": ("rpc-client-tickloop", ["--io", "epoll", "--timers", "wheel"]),
    "tickloop-io_uring-heap4": ("rpc-client-tickloop", ["--io", "io_uring", "--timers", "heap4"]),
    "tickloop-io_uring-wheel": ("rpc-client-tickloop", ["--io", "io_uring", "--timers", "wheel"]),
    "libev": ("rpc-client-libev", []),
    "libuv": ("rpc-client-libuv", []),
    "asio": ("rpc-client-asio", []),
}
FIELDS = ["cpu_us_per_request", "requests_per_s", "timeouts_expected", "timeouts_fired",
          "timeouts_early", "p50_rtt_us", "p99_rtt_us"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_server(build, threads):
    port = free_port()
    exe = os.path.join(build, "benches", "rpc", "rpc-server")
    proc = subprocess.Popen([exe, "--port", str(port), "--threads", str(threads)],
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening" not in line:
        sys.exit("rpc-server did not start: %r" % line)
    return proc, port


def run_client(build, name, port, args):
    exe_name, extra = CLIENTS[name]
    exe = os.path.join(build, "benches", "rpc", exe_name)
    cmd = [exe, "--port", str(port), "--conns", str(args.conns), "--inflight",
           str(args.inflight), "--seconds", str(args.seconds)] + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + 60)
    if out.returncode != 0:
        sys.exit("%s failed (%d): %s" % (name, out.returncode, out.stderr.strip()))
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["client"] = name
    return row


def median_row(name, rows):
    out = {"client": name}
    for f in FIELDS:
        out[f] = statistics.median(r[f] for r in rows)
    # Correctness must hold in every round, not in the median one.
    out["timeouts_early_max"] = max(r["timeouts_early"] for r in rows)
    out["timeouts_mismatch_rounds"] = sum(
        r["timeouts_fired"] != r["timeouts_expected"] for r in rows)
    return out


def print_table(rows, base):
    print("%-24s %8s %8s %10s %9s %9s %6s %8s %8s" % (
        "client", "cpu_us/r", "x libev", "req/s", "expected", "fired", "early", "p50_us",
        "p99_us"))
    for r in rows:
        ratio = r["cpu_us_per_request"] / base if base else float("nan")
        print("%-24s %8.3f %8.2f %10.0f %9.0f %9.0f %6.0f %8.0f %8.0f" % (
            r["client"], r["cpu_us_per_request"], ratio, r["requests_per_s"],
            r["timeouts_expected"], r["timeouts_fired"], r["timeouts_early_max"],
            r["p50_rtt_us"], r["p99_rtt_us"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--clients", default=" ".join(CLIENTS))
    ap.add_argument("--server-threads", type=int, default=1)
    args = ap.parse_args()
    names = [n for n in args.clients.split()
             if os.path.exists(os.path.join(args.build, "benches", "rpc", CLIENTS[n][0]))]
    skipped = [n for n in args.clients.split() if n not in names]
    if skipped:
        print("skipped (not built): " + " ".join(skipped), file=sys.stderr)
    server, port = start_server(args.build, args.server_threads)
    results = {n: [] for n in names}
    try:
        for rnd in range(args.rounds):
            for n in names:
                row = run_client(args.build, n, port, args)
                results[n].append(row)
                print("round %d %-24s %.3f us/request %.0f req/s" % (
                    rnd + 1, n, row["cpu_us_per_request"], row["requests_per_s"]),
                    file=sys.stderr)
                time.sleep(0.2)
    finally:
        server.kill()
    rows = [median_row(n, results[n]) for n in names]
    base = next((r["cpu_us_per_request"] for r in rows if r["client"] == "libev"), 0)
    print("%d connections x %d in flight, %g s x %d rounds, medians" % (
        args.conns, args.inflight, args.seconds, args.rounds))
    print_table(rows, base)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"conns": args.conns, "inflight": args.inflight, "seconds": args.seconds,
                       "rounds": args.rounds, "rows": rows,
                       "runs": {n: results[n] for n in names}}, f, indent=1)
    bad = [r["client"] for r in rows
           if r["timeouts_early_max"] or r["timeouts_mismatch_rounds"]]
    if bad:
        print("timeouts wrong (early, or fired != expected) on: " + " ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
