/* SPDX-License-Identifier: MIT */
/*
 * The part of the tests' loop helpers that needs no test framework: the
 * monotonic clock, a socketpair, a stream loop made under a chosen
 * TICKLOOP_URING_STREAMS, and a check for the child of a fork. C11 and C++;
 * loop_helpers.h builds the Criterion helpers on it, and the fuzz targets
 * (tests/reliability), which cannot use Criterion, include it alone. Its
 * users define _GNU_SOURCE before any system header (setenv, socketpair).
 */
#ifndef TICKLOOP_TESTS_LOOP_SETUP_H
#define TICKLOOP_TESTS_LOOP_SETUP_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#define MS 1000000ull

static inline uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A connected, non-blocking AF_UNIX stream socketpair; 0 or -errno. */
static inline int socket_pair(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0 ? 0
                                                                                        : -errno;
}

/* Makes *loop on I/O kind io with a ring of `count` read buffers of `size`
 * bytes, with TICKLOOP_URING_STREAMS set to streams_env while it is made
 * (NULL: unset, so io_uring takes its default stream path) and unset after.
 * Returns tl_loop_new's result: an io_uring the kernel lacks is an error
 * the caller may skip on. */
static inline int new_stream_loop(tl_loop **loop, tl_io_kind io, const char *streams_env,
                                  uint32_t size, uint32_t count) {
    if (streams_env)
        setenv("TICKLOOP_URING_STREAMS", streams_env, 1);
    else
        unsetenv("TICKLOOP_URING_STREAMS");
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = io;
    opts.read_buffer_size = size;
    opts.read_buffer_count = count;
    *loop = NULL;
    int r = tl_loop_new(loop, &opts);
    unsetenv("TICKLOOP_URING_STREAMS");
    return r;
}

/* A check for the child of a fork, where Criterion must not be used: prints
 * the failed condition and exits with status 2, which the parent asserts
 * against. */
#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #cond);                      \
            _exit(2);                                                                              \
        }                                                                                          \
    } while (0)

#endif /* TICKLOOP_TESTS_LOOP_SETUP_H */
