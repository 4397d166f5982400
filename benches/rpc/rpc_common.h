/* SPDX-License-Identifier: MIT */
/*
 * The RPC benchmark's shared parts (benches/rpc/README in run.py's
 * docstring): the wire format, the client's options, its counters and its
 * report. Header-only, C and C++, so that every client links nothing of
 * the others.
 *
 * Wire: 16-byte frames both ways. A request is {id, 0, 0}; the server
 * answers each after a delay it draws per request (99% uniform in 0-2 ms,
 * 1% 300 ms) with {id, late, 0}, late = 1 for the 300 ms ones. A client
 * keeps `inflight` requests outstanding on each of `conns` connections,
 * each with a 100 ms timeout started when it is sent and cancelled when its
 * answer comes: exactly the late requests must time out (each one's late
 * answer arrives 200 ms after its timeout and is dropped), none before its
 * 100 ms are up.
 */
#ifndef TICKLOOP_BENCHES_RPC_COMMON_H
#define TICKLOOP_BENCHES_RPC_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define RPC_FRAME 16
#define RPC_TIMEOUT_NS 100000000ull /* 100 ms */
#define RPC_LATE_NS 300000000ull    /* what the server holds a late request */
#define RPC_MAX_INFLIGHT 1024
#define RPC_HIST_US 100000 /* RTT histogram: 1 us buckets up to the timeout */

typedef struct rpc_frame {
    uint64_t id;
    uint32_t late;
    uint32_t pad;
} rpc_frame;

/* An id names the connection, the slot and the slot's sequence, so an
   answer finds its request in O(1) and a stale one (its request timed out,
   the slot went on) is told apart. */
static inline uint64_t rpc_id(uint32_t conn, uint32_t slot, uint32_t seq) {
    return (uint64_t)conn << 40 | (uint64_t)slot << 24 | (seq & 0xffffffu);
}
static inline uint32_t rpc_id_conn(uint64_t id) {
    return (uint32_t)(id >> 40);
}
static inline uint32_t rpc_id_slot(uint64_t id) {
    return (uint32_t)(id >> 24) & 0xffffu;
}

/* Splits n received bytes into frames, each handed to fn(ctx, frame); a
   frame cut by the end of the bytes waits in carry (*carried bytes of it)
   for the next call. */
typedef void (*rpc_frame_fn)(void *ctx, const unsigned char *frame);
static inline void rpc_frames(unsigned char *carry, size_t *carried, const unsigned char *b,
                              size_t n, rpc_frame_fn fn, void *ctx) {
    if (*carried) {
        size_t take = RPC_FRAME - *carried < n ? RPC_FRAME - *carried : n;
        memcpy(carry + *carried, b, take);
        *carried += take;
        b += take;
        n -= take;
        if (*carried < RPC_FRAME) return;
        fn(ctx, carry);
        *carried = 0;
    }
    for (; n >= RPC_FRAME; b += RPC_FRAME, n -= RPC_FRAME) fn(ctx, b);
    memcpy(carry, b, n);
    *carried = n;
}

typedef struct rpc_opts {
    const char *host;
    int port;
    int conns, inflight;
    double seconds;
} rpc_opts;

/* --port N --conns N --inflight N --seconds S; extra options are the
   caller's (returned through *rest, argv index of the first unknown). */
static inline int rpc_parse(int argc, char **argv, rpc_opts *o) {
    o->host = "127.0.0.1";
    o->port = 0;
    o->conns = 64;
    o->inflight = 16;
    o->seconds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            o->port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--conns"))
            o->conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--inflight"))
            o->inflight = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            o->seconds = atof(argv[i + 1]);
    }
    if (o->port <= 0 || o->conns < 1 || o->inflight < 1 || o->inflight > RPC_MAX_INFLIGHT ||
        o->seconds <= 0) {
        fprintf(stderr, "%s: needs --port N [--conns N --inflight N (<= %d) --seconds S]\n",
                argv[0], RPC_MAX_INFLIGHT);
        return -1;
    }
    return 0;
}

static inline uint64_t rpc_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rpc_cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000ull +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* What a client counts. The window (measured: CPU, wall, requests) runs
   from when every connection is up until the end of --seconds; timeouts
   and late answers are counted until the drain ends. */
typedef struct rpc_stats {
    int measuring;
    uint64_t t0_ns, t1_ns, cpu0_us, cpu1_us;
    uint64_t done;           /* requests finished in the window: answered or timed out */
    uint64_t timeouts_fired; /* timeout callbacks that expired a request */
    uint64_t timeouts_early; /* ... before 100 ms had passed since its send */
    uint64_t late_answers;   /* answers marked late (each one's request should have
                                timed out) */
    uint64_t late_in_time;   /* a late answer that found its request still waiting */
    uint64_t normal_dropped; /* a prompt answer that came after its timeout */
    uint32_t *hist;          /* RTT of the answers in time, 1 us buckets */
} rpc_stats;

static inline void rpc_stats_init(rpc_stats *st) {
    memset(st, 0, sizeof *st);
    st->hist = (uint32_t *)calloc(RPC_HIST_US + 1, sizeof *st->hist);
}

static inline void rpc_window_start(rpc_stats *st) {
    st->measuring = 1;
    st->t0_ns = rpc_now_ns();
    st->cpu0_us = rpc_cpu_us();
}
static inline void rpc_window_end(rpc_stats *st) {
    st->measuring = 0;
    st->t1_ns = rpc_now_ns();
    st->cpu1_us = rpc_cpu_us();
}

/* An answer for a request still waiting, sent at sent_ns. */
static inline void rpc_answered(rpc_stats *st, uint64_t sent_ns, uint64_t now_ns, int late) {
    if (late) {
        ++st->late_answers;
        ++st->late_in_time;
    }
    if (!st->measuring) return;
    ++st->done;
    uint64_t us = (now_ns - sent_ns) / 1000;
    ++st->hist[us < RPC_HIST_US ? us : RPC_HIST_US];
}
/* An answer whose request had timed out already: dropped. */
static inline void rpc_stale(rpc_stats *st, int late) {
    if (late)
        ++st->late_answers;
    else
        ++st->normal_dropped;
}
/* A timeout fired at now_ns (the clock, read in its callback) for a request
   whose timer started at base_ns (the library's time at the send: its
   cached now, which the timer counts from). */
static inline void rpc_timed_out(rpc_stats *st, uint64_t base_ns, uint64_t now_ns) {
    ++st->timeouts_fired;
    if (now_ns - base_ns < RPC_TIMEOUT_NS) ++st->timeouts_early;
    if (st->measuring) ++st->done;
}

static inline uint64_t rpc_percentile_us(const rpc_stats *st, double q) {
    uint64_t total = 0;
    for (int i = 0; i <= RPC_HIST_US; ++i) total += st->hist[i];
    uint64_t rank = (uint64_t)(q * (double)total + 0.999999), seen = 0;
    for (int i = 0; i <= RPC_HIST_US; ++i) {
        seen += st->hist[i];
        if (total && seen >= rank) return (uint64_t)i;
    }
    return 0;
}

/* One JSON line on stdout; run.py reads it. */
static inline void rpc_report(const rpc_stats *st, const char *client, uint64_t wakeups) {
    double secs = (double)(st->t1_ns - st->t0_ns) / 1e9;
    uint64_t cpu = st->cpu1_us - st->cpu0_us;
    printf("{\"client\": \"%s\", \"seconds\": %.3f, \"requests\": %llu, \"cpu_us\": %llu, "
           "\"cpu_us_per_request\": %.4f, \"requests_per_s\": %.1f, "
           "\"timeouts_expected\": %llu, \"timeouts_fired\": %llu, \"timeouts_early\": %llu, "
           "\"late_in_time\": %llu, \"normal_dropped\": %llu, "
           "\"p50_rtt_us\": %llu, \"p99_rtt_us\": %llu, \"wakeups\": %llu}\n",
           client, secs, (unsigned long long)st->done, (unsigned long long)cpu,
           st->done ? (double)cpu / (double)st->done : 0.0,
           secs > 0 ? (double)st->done / secs : 0.0, (unsigned long long)st->late_answers,
           (unsigned long long)st->timeouts_fired, (unsigned long long)st->timeouts_early,
           (unsigned long long)st->late_in_time, (unsigned long long)st->normal_dropped,
           (unsigned long long)rpc_percentile_us(st, 0.5),
           (unsigned long long)rpc_percentile_us(st, 0.99), (unsigned long long)wakeups);
    fflush(stdout);
}

#endif /* TICKLOOP_BENCHES_RPC_COMMON_H */
