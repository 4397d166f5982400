/* SPDX-License-Identifier: MIT */
/*
 * tickloop_new.h: how the HTTP benchmark's tickloop servers (server_tickloop.c
 * on readiness, server_tickloop_streams.c on streams) make their loop from
 * --io. Kept out of http_core.h, which the libev and libuv servers share and
 * which knows no event loop.
 */
#ifndef TL_BENCH_HTTP_TICKLOOP_NEW_H
#define TL_BENCH_HTTP_TICKLOOP_NEW_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tickloop/tickloop.h>

#include "http_core.h"

/* SIGUSR1: one line on stdout, "stats iterations=N io_batched_waits=N
 * io_batch_ns=N", the loop's counters so far (run.sh reads two of them
 * around its measured run). */
static inline void hb_tickloop_on_usr1(tl_loop *loop, tl_signal *s, int signo) {
    (void)s;
    (void)signo;
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    printf("stats iterations=%llu io_batched_waits=%llu io_batch_ns=%llu\n",
           (unsigned long long)st.iterations, (unsigned long long)st.io_batched_waits,
           (unsigned long long)st.io_batch_ns);
    fflush(stdout);
}

/* A loop on the I/O backend io names ("epoll" or "io_uring"), with read
 * buffers of read_buffer_size bytes (0: the library's default) and the I/O
 * batching *batch asks for (--io-batch: tl_loop_options.io_batch_ns and
 * io_batch_adaptive; off leaves both 0, so TICKLOOP_IO_BATCH may set
 * them). On another io it exits with status 2, when the loop cannot be made
 * with status 1, after a message that starts with prog. Says on stderr
 * which batching is in effect, and prints the loop's counters on SIGUSR1
 * (hb_tickloop_on_usr1). */
static inline tl_loop *hb_tickloop_new(const char *prog, const char *io, uint32_t read_buffer_size,
                                       const struct hb_io_batch *batch) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    if (strcmp(io, "epoll") == 0) {
        opts.io = TL_IO_EPOLL;
    } else if (strcmp(io, "io_uring") == 0) {
        opts.io = TL_IO_URING;
    } else {
        fprintf(stderr, "%s: --io must be epoll or io_uring, not '%s'\n", prog, io);
        exit(2);
    }
    opts.read_buffer_size = read_buffer_size;
    opts.io_batch_ns = batch->ns;
    opts.io_batch_adaptive = (uint32_t)batch->adaptive;
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        const char *why = tl_loop_new_error();
        fprintf(stderr, "%s: tl_loop_new: %s%s%s\n", prog, tl_strerror(r), why ? ": " : "",
                why ? why : "");
        exit(1);
    }
    static tl_signal usr1;
    r = tl_signal_start(loop, &usr1, SIGUSR1, hb_tickloop_on_usr1, NULL);
    if (r < 0) {
        fprintf(stderr, "%s: tl_signal_start: %s\n", prog, tl_strerror(r));
        exit(1);
    }
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    fprintf(stderr, "%s: io %s, io_batch_ns %llu%s\n", prog, tl_loop_io_name(loop),
            (unsigned long long)st.io_batch_ns,
            st.io_batch_ns && batch->adaptive ? " adaptive" : "");
    return loop;
}

#endif
