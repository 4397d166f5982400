/* SPDX-License-Identifier: MIT */
/*
 * tickloop_new.h: how the HTTP benchmark's tickloop servers (server_tickloop.c
 * on readiness, server_tickloop_streams.c on streams) make their loop from
 * --io. Kept out of http_core.h, which the libev and libuv servers share and
 * which knows no event loop.
 */
#ifndef TL_BENCH_HTTP_TICKLOOP_NEW_H
#define TL_BENCH_HTTP_TICKLOOP_NEW_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tickloop/tickloop.h>

/* A loop on the I/O backend io names ("epoll" or "io_uring"), with read
 * buffers of read_buffer_size bytes (0: the library's default). On another
 * io it exits with status 2, when the loop cannot be made with status 1,
 * after a message that starts with prog. */
static inline tl_loop *hb_tickloop_new(const char *prog, const char *io,
                                       uint32_t read_buffer_size) {
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
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        fprintf(stderr, "%s: tl_loop_new: %s\n", prog, tl_strerror(r));
        exit(1);
    }
    return loop;
}

#endif
