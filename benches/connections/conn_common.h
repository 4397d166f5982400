/* SPDX-License-Identifier: MIT */
/*
 * conn_common.h: what every server of the heartbeating-connections benchmark
 * (benches/connections/) shares, so that only the event loop differs.
 *
 * A server holds many idle TCP connections. Each connection has an idle
 * timeout (60 s by default, times --scale) restarted by every heartbeat the
 * client sends; a connection silent for that long is closed by the server.
 * A heartbeat is 8 bytes: the client's CLOCK_MONOTONIC time of sending, in
 * ns, so the server can measure how long after the send it restarted the
 * timer (one machine, one clock). The server never writes.
 *
 * On SIGUSR1 a server prints one "stats" line on stdout (counters, its own
 * CPU time from getrusage, histograms); on SIGTERM it prints a last one and
 * exits 0. run.py reads these lines.
 */
#ifndef TL_BENCH_CONN_COMMON_H
#define TL_BENCH_CONN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CB_MS ((uint64_t)1000000)

/* Log-linear histogram of nanosecond values: 8 buckets per power of two
 * (relative error at most 1/8), printed sparse as "index:count,...". */
enum { CB_HIST_BUCKETS = 8 * 62 };
struct cb_hist {
    uint64_t count, max;
    uint64_t bucket[CB_HIST_BUCKETS];
};
void cb_hist_add(struct cb_hist *h, uint64_t v);

struct cb_config {
    int port;
    uint64_t timeout_ns;        /* idle timeout, already scaled */
    uint64_t leeway_ns;         /* tickloop: tl_timer_set_leeway on the idle timers */
    const char *io;             /* tickloop: "epoll" or "io_uring" */
    const char *timers;         /* tickloop: timer backend name, NULL for the default */
    uint64_t io_batch_ns;       /* tickloop: tl_loop_options.io_batch_ns; libev:
                                   ev_set_io_collect_interval (fixed only) */
    uint32_t io_batch_adaptive; /* tickloop: tl_loop_options.io_batch_adaptive;
                                   libev keeps its defaults when it is 1 */
};

/* Counters every server keeps, printed by cb_print_stats. */
struct cb_stats {
    uint64_t accepted, open;
    uint64_t reads;       /* read callbacks with data */
    uint64_t bytes;       /* heartbeat bytes received (8 per heartbeat) */
    uint64_t idle_closed; /* closed by the idle timer */
    uint64_t idle_early;  /* ... before their deadline (never expected) */
    uint64_t peer_closed; /* EOF from the client */
    uint64_t errors;      /* read errors (ECONNRESET, ...) */
    uint64_t accept_errors;
    struct cb_hist restart; /* heartbeat sent -> idle timer restarted, ns */
    struct cb_hist idle;    /* idle close time - deadline, ns */
};

extern struct cb_stats cb_stats;
extern struct cb_config cb_config;

/* What a server takes beyond --port N --timeout-ms N --scale X --leeway-ms N:
 * CB_OPT_LOOP, --io epoll|io_uring --timers NAME (tickloop); CB_OPT_BATCH,
 * --io-batch off|adaptive:US|fixed:US (US in microseconds; tickloop, and
 * libev for fixed:US as its I/O collect interval) and its older spelling
 * --io-batch-us N, the same as --io-batch fixed:N. */
enum { CB_OPT_LOOP = 1, CB_OPT_BATCH = 2 };

/* Parses the options `opts` allows; exits with a message on anything else. */
void cb_parse_args(int argc, char **argv, int opts);

/* A non-blocking listening socket on 127.0.0.1:port with SO_REUSEPORT, so
 * that several server processes share one port; prints "listening on PORT".
 * Exits on failure. */
int cb_listen(int port);

/* One loopback TCP connection, both ends blocking and close-on-exec:
 * fds[0] connected, fds[1] accepted (a listener on an ephemeral port, closed
 * again). 0, or a negative errno with nothing left open. */
int cb_tcp_pair(int fds[2]);

/* CLOCK_MONOTONIC in ns (a vDSO read). */
uint64_t cb_now_ns(void);

/* Accounts the n bytes of one read on a connection whose stream offset
 * modulo 8 is *off: counts the heartbeats and, when the read ends on a
 * heartbeat boundary, records restart lateness from the last heartbeat's
 * timestamp. Call it after the idle timer was restarted. */
void cb_account_read(uint8_t *off, const void *buf, size_t n);

/* Records an idle close whose timer deadline was deadline_ns (CLOCK_MONOTONIC). */
void cb_account_idle(uint64_t deadline_ns);

/* Prints one stats line: name, counters, getrusage CPU, RSS, histograms. */
void cb_print_stats(const char *name, const char *extra);

#ifdef __cplusplus
}
#endif

#endif
