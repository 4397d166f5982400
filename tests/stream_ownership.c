/* SPDX-License-Identifier: MIT */
/*
 * What a stream or listener call takes from its caller, and until when:
 * - tl_stream_write copies an array of 1 to 4 buffers before it returns (a
 *   stack array is safe), and sends a request's buffers as one vectored
 *   send, never one per buffer (a SOCK_SEQPACKET peer receives each write as
 *   one record: the kernel's own count of sends);
 * - tl_listener_stop lets go of the listening socket before it returns: once
 *   the caller closes it, the port binds again and a connect is refused;
 * - a closing stream keeps its loop alive until its close callback has run,
 *   referenced or not, in every run mode.
 * meson runs this file once per I/O backend and once on io_uring with the
 * readiness path forced.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "loop_helpers.h"

/* ---- helpers ------------------------------------------------------------- */

enum { kWrites = 64, kFill = 4 << 20 };

/* The bytes the peer read, through a tl_io watcher on the same loop. */
struct sink {
    tl_io io;
    char *buf;
    size_t got, cap;
    int records; /* reads that returned data (one per record on SEQPACKET) */
};

static void on_sink(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop, (void)revents;
    struct sink *k = w->data;
    for (;;) {
        char tmp[65536];
        ssize_t n = recv(w->fd, tmp, sizeof tmp, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        cr_assert(k->got + (size_t)n <= k->cap, "the peer got more bytes than were written");
        memcpy(k->buf + k->got, tmp, (size_t)n);
        k->got += (size_t)n;
        ++k->records;
    }
}

static void sink_start(tl_loop *loop, struct sink *k, int fd, size_t cap) {
    memset(k, 0, sizeof *k);
    k->buf = malloc(cap);
    k->cap = cap;
    cr_assert(k->buf);
    tl_io_init(&k->io, fd, on_sink, k);
    cr_assert_eq(tl_io_start(loop, &k->io, TL_READ), 0);
}

static void sink_stop(tl_loop *loop, struct sink *k) {
    tl_io_stop(loop, &k->io);
    free(k->buf);
}

struct writes {
    tl_write_req req[kWrites + 1];
    int done, failed;
};

static void on_written(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    struct writes *w = req->data;
    ++w->done;
    if (status != 0) ++w->failed;
}

static void on_closed(tl_loop *loop, tl_stream *s) {
    (void)loop;
    ++*(int *)s->data;
}

/* A socketpair p and s a stream on p[0] whose close callback counts into
 * *closed; p[1] is the raw peer. */
static void stream_on_pair(tl_stream *s, int p[2], int *closed) {
    make_pair(p);
    tl_stream_init(s, p[0], closed);
}

/* Runs the loop until *count reaches want; fails instead of hanging. */
static void run_until_count(tl_loop *loop, const int *count, int want) {
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 20000);
    while (*count < want && !fired) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    tl_timer_stop(loop, &fs);
    cr_assert(!fired, "stopped at %d of %d", *count, want);
}

/* Byte i of the pattern write w sends. */
static char pattern(int w, size_t i) {
    return (char)('a' + (w * 7 + (int)i) % 26);
}

/* Queues kWrites writes of `bufs` buffers each behind a write of kFill
 * bytes the socket cannot take at once, every array in the same stack
 * slot, overwritten by the next write's. */
static void queue_from_stack(tl_loop *loop, tl_stream *s, struct writes *w, const char *fill,
                             char (*data)[64], int bufs) {
    struct iovec big = {(void *)fill, kFill};
    w->req[0].data = w;
    cr_assert_eq(tl_stream_write(loop, s, &w->req[0], &big, 1, on_written), 0);
    for (int i = 0; i < kWrites; ++i) {
        struct iovec v[4];
        for (int b = 0; b < bufs; ++b) {
            v[b].iov_base = data[i] + b * (64 / bufs);
            v[b].iov_len = (size_t)(64 / bufs);
        }
        w->req[i + 1].data = w;
        int e = tl_stream_write(loop, s, &w->req[i + 1], v, bufs, on_written);
        cr_assert_eq(e, 0, "tl_stream_write: %s", tl_strerror(e));
        memset(v, 0xa5, sizeof v); /* what a later stack frame would do */
    }
    big.iov_base = NULL;
    big.iov_len = 0;
}

static void stack_arrays_arrive_intact(int bufs) {
    tl_loop *loop = new_loop();
    int p[2];
    make_pair(p);
    char *fill = malloc(kFill);
    static char data[kWrites][64];
    for (size_t i = 0; i < kFill; ++i) fill[i] = pattern(-1, i);
    for (int w = 0; w < kWrites; ++w)
        for (size_t i = 0; i < 64; ++i) data[w][i] = pattern(w, i);
    struct sink k;
    sink_start(loop, &k, p[1], kFill + sizeof data);
    tl_stream s;
    int closed = 0;
    tl_stream_init(&s, p[0], &closed);
    struct writes w = {0};
    queue_from_stack(loop, &s, &w, fill, data, bufs);
    run_until_count(loop, &w.done, kWrites + 1);
    cr_assert_eq(w.failed, 0);
    while (k.got < kFill + sizeof data) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    cr_assert(memcmp(k.buf, fill, kFill) == 0, "the first write's bytes differ");
    cr_assert(memcmp(k.buf + kFill, data, sizeof data) == 0,
              "a write queued from a stack array sent other bytes");
    cr_assert_eq(tl_stream_close(loop, &s, on_closed), 0);
    run_until_count(loop, &closed, 1);
    sink_stop(loop, &k);
    close(p[1]);
    free(fill);
    free_loop(loop);
}

/* ---- the iovec array ------------------------------------------------------ */

Test(stream_ownership, stack_iovec_of_one_buffer_is_copied) {
    stack_arrays_arrive_intact(1);
}

Test(stream_ownership, stack_iovec_of_two_buffers_is_copied) {
    stack_arrays_arrive_intact(2);
}

Test(stream_ownership, stack_iovec_of_four_buffers_is_copied) {
    stack_arrays_arrive_intact(4);
}

/* Writes n buffers of distinct bytes on a SEQPACKET pair and returns how
 * many records the peer received for them. */
static int records_for_one_write(tl_loop *loop, int n) {
    int p[2];
    cr_assert(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) == 0);
    struct sink k;
    sink_start(loop, &k, p[1], 4096);
    tl_stream s;
    int closed = 0;
    tl_stream_init(&s, p[0], &closed);
    char bytes[8][8];
    struct iovec v[8];
    for (int i = 0; i < n; ++i) {
        memset(bytes[i], 'A' + i, sizeof bytes[i]);
        v[i].iov_base = bytes[i];
        v[i].iov_len = sizeof bytes[i];
    }
    struct writes w = {0};
    w.req[0].data = &w;
    cr_assert_eq(tl_stream_write(loop, &s, &w.req[0], v, n, on_written), 0);
    run_until_count(loop, &w.done, 1);
    cr_assert_eq(w.failed, 0);
    while (k.got < (size_t)n * 8) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    cr_assert(memcmp(k.buf, bytes, (size_t)n * 8) == 0);
    int records = k.records;
    cr_assert_eq(tl_stream_close(loop, &s, on_closed), 0);
    run_until_count(loop, &closed, 1);
    sink_stop(loop, &k);
    close(p[1]);
    return records;
}

Test(stream_ownership, a_write_of_several_buffers_is_one_send) {
    tl_loop *loop = new_loop();
    for (int n = 1; n <= 8; ++n) {
        int records = records_for_one_write(loop, n);
        cr_assert_eq(records, 1, "a write of %d buffers took %d sends", n, records);
    }
    free_loop(loop);
}

/* ---- listeners ------------------------------------------------------------ */

static void on_accept_close(tl_loop *loop, tl_listener *l, int fd) {
    (void)loop, (void)l;
    if (fd >= 0) close(fd);
}

/* A listening socket on an ephemeral loopback port, without SO_REUSEADDR:
 * the port binds again only once nothing holds the old socket. */
static int listen_any(struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)addr, sizeof *addr) == 0);
    socklen_t len = sizeof *addr;
    cr_assert(getsockname(fd, (struct sockaddr *)addr, &len) == 0);
    cr_assert(listen(fd, 8) == 0);
    return fd;
}

static void port_is_free(const struct sockaddr_in *addr) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int r;
    do r = connect(c, (const struct sockaddr *)addr, sizeof *addr);
    while (r < 0 && errno == EINTR);
    cr_assert(r < 0 && errno == ECONNREFUSED, "connect after the close: %s",
              r == 0 ? "accepted" : strerror(errno));
    close(c);
    int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(bind(b, (const struct sockaddr *)addr, sizeof *addr) == 0, "bind after the close: %s",
              strerror(errno));
    close(b);
}

static void listener_stop_frees_the_port(int iterations) {
    tl_loop *loop = new_loop();
    struct sockaddr_in addr;
    int fd = listen_any(&addr);
    tl_listener l;
    memset(&l, 0, sizeof l);
    cr_assert_eq(tl_listener_start(loop, &l, fd, on_accept_close, NULL), 0);
    for (int i = 0; i < iterations; ++i) cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) >= 0);
    cr_assert_eq(tl_listener_stop(loop, &l), 0);
    close(fd);
    port_is_free(&addr);
    cr_assert(tl_loop_run(loop, TL_RUN_NOWAIT) >= 0); /* its late completions: dropped */
    free_loop(loop);
}

Test(stream_ownership, listener_stop_then_close_frees_the_port) {
    listener_stop_frees_the_port(0);
}

Test(stream_ownership, listener_stop_after_iterations_then_close_frees_the_port) {
    listener_stop_frees_the_port(3);
}

/* ---- closing handles ------------------------------------------------------ */

static void closing_stream_completes(tl_run_mode mode, int ref) {
    tl_loop *loop = new_loop();
    int p[2], closed = 0;
    tl_stream s;
    stream_on_pair(&s, p, &closed);
    cr_assert_eq(tl_stream_set_ref(loop, &s, ref), 0);
    struct writes w = {0};
    struct iovec v = {(void *)"x", 1};
    w.req[0].data = &w;
    cr_assert_eq(tl_stream_write(loop, &s, &w.req[0], &v, 1, on_written), 0);
    cr_assert_eq(tl_stream_close(loop, &s, on_closed), 0);
    cr_assert_eq(tl_loop_alive(loop), 1, "a closing stream keeps the loop alive");
    /* One run in the given mode completes it when nothing is in flight;
       a send the kernel holds may take more NOWAIT runs for its
       cancellation to come back: as many as fit in a generous bound. */
    uint64_t until = mono_ns() + 5000 * MS;
    while (!closed && mono_ns() < until) cr_assert(tl_loop_run(loop, mode) >= 0);
    cr_assert_eq(closed, 1, "the close callback never ran");
    cr_assert_eq(w.done, 1);
    cr_assert_eq(tl_loop_alive(loop), 0);
    close(p[1]);
    free_loop(loop);
}

Test(stream_ownership, unreferenced_closing_stream_completes_in_nowait) {
    closing_stream_completes(TL_RUN_NOWAIT, 0);
}

Test(stream_ownership, unreferenced_closing_stream_completes_in_once) {
    closing_stream_completes(TL_RUN_ONCE, 0);
}

Test(stream_ownership, unreferenced_closing_stream_completes_in_default) {
    closing_stream_completes(TL_RUN_DEFAULT, 0);
}

Test(stream_ownership, referenced_closing_stream_completes_in_nowait) {
    closing_stream_completes(TL_RUN_NOWAIT, 1);
}

static void on_read_drop(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    (void)loop, (void)s, (void)buf, (void)n;
}

Test(stream_ownership, unreferenced_reading_stream_closed_completes_and_frees) {
    tl_loop *loop = new_loop();
    int p[2], closed = 0;
    tl_stream s;
    stream_on_pair(&s, p, &closed);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read_drop), 0);
    cr_assert_eq(tl_stream_set_ref(loop, &s, 0), 0);
    cr_assert_eq(tl_loop_alive(loop), 0);
    cr_assert_eq(tl_stream_close(loop, &s, on_closed), 0);
    /* A set_ref of a closing stream changes nothing of what keeps the loop. */
    cr_assert_eq(tl_stream_set_ref(loop, &s, 0), 0);
    cr_assert_eq(tl_loop_alive(loop), 1);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 0);
    cr_assert_eq(closed, 1);
    check_loop(loop);
    close(p[1]);
    free_loop(loop);
}

/* ---- a caller's array of more than 4 buffers ------------------------------ */

#ifdef NDEBUG
Test(stream_ownership, changed_long_array_aborts_in_debug_builds) {
    cr_skip_test("release build: check compiled out");
}
#else
Test(stream_ownership, changed_long_array_aborts_in_debug_builds, .signal = SIGABRT) {
    tl_loop *loop = new_loop();
    int p[2], closed = 0;
    tl_stream s;
    stream_on_pair(&s, p, &closed);
    char *fill = calloc(1, kFill);
    static char bytes[6][8];
    static struct iovec v[6];
    for (int i = 0; i < 6; ++i) {
        v[i].iov_base = bytes[i];
        v[i].iov_len = sizeof bytes[i];
    }
    struct writes w = {0};
    struct iovec big = {fill, kFill};
    w.req[0].data = w.req[1].data = &w;
    cr_assert_eq(tl_stream_write(loop, &s, &w.req[0], &big, 1, on_written), 0);
    cr_assert_eq(tl_stream_write(loop, &s, &w.req[1], v, 6, on_written), 0);
    v[3].iov_len = 4; /* the rule broken: the array changed before its callback */
    for (;;) {
        char tmp[65536];
        while (recv(p[1], tmp, sizeof tmp, MSG_DONTWAIT) > 0) {
        }
        tl_loop_run(loop, TL_RUN_NOWAIT);
    }
}
#endif
