/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the stream and listener suites (streams.c, stream_misuse.c):
 * a loop with a read buffer ring, the stream path the environment asks for,
 * loopback TCP listeners and pairs, a recorder of a stream's callbacks and
 * runs of the loop until it saw something (bounded by a failsafe). Users
 * define _GNU_SOURCE and include loop_helpers.h first.
 */
#ifndef TICKLOOP_TESTS_STREAM_HELPERS_H
#define TICKLOOP_TESTS_STREAM_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "loop_helpers.h"

static inline tl_loop *new_loop_bufs(uint32_t size, uint32_t count) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.read_buffer_size = size;
    opts.read_buffer_count = count;
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, &opts);
    const char *want = getenv("TICKLOOP_IO");
    if (r < 0 && want && strcmp(want, "io_uring") == 0 && r != -EINVAL)
        cr_skip_test("io_uring is not available here: %s", tl_strerror(r));
    cr_assert(r == 0, "tl_loop_new: %s", tl_strerror(r));
    return loop;
}

/* The path the environment asks for: completion on io_uring unless forced. */
static inline void check_path(tl_loop *loop) {
    const char *io = getenv("TICKLOOP_IO");
    const char *force = getenv("TICKLOOP_URING_STREAMS");
    const char *path = tl_loop_stream_path(loop);
    cr_assert(path != NULL);
    if (io && strcmp(io, "epoll") == 0) cr_assert_str_eq(path, "readiness");
    if (force && strcmp(force, "readiness") == 0) cr_assert_str_eq(path, "readiness");
    /* Which path io_uring takes depends on the kernel; a run that must cover
       one names it. */
    const char *expect = getenv("TICKLOOP_EXPECT_STREAM_PATH");
    if (expect && *expect) cr_assert_str_eq(path, expect);
}

static inline int tcp_listener(struct sockaddr_in *addr, int backlog) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)addr, sizeof *addr) == 0, "bind: %s", strerror(errno));
    socklen_t len = sizeof *addr;
    cr_assert(getsockname(fd, (struct sockaddr *)addr, &len) == 0);
    cr_assert(listen(fd, backlog) == 0);
    return fd;
}

static inline int tcp_connect(const struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    cr_assert(connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0, "connect: %s",
              strerror(errno));
    return fd;
}

/* A connected TCP pair over loopback: c[0] the client, c[1] the accepted. */
static inline void tcp_pair(int c[2]) {
    struct sockaddr_in addr;
    int lfd = tcp_listener(&addr, 4);
    c[0] = tcp_connect(&addr);
    c[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    cr_assert(c[1] >= 0);
    close(lfd);
}

/* What a stream's callbacks saw. */
typedef struct rec {
    char buf[1 << 16];
    size_t got;
    int eofs;
    int errs;
    ptrdiff_t last_err;
    int closes;
    int order[16]; /* write callbacks: req index, in the order they ran */
    int status[16];
    int writes;
    int close_after_writes; /* writes seen when the close callback ran */
    int fd_open_at_close;   /* fcntl(fd) worked inside the close callback */
} rec;

static inline void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    (void)loop;
    rec *r = s->data;
    if (n > 0) {
        cr_assert(buf != NULL);
        cr_assert(r->got + (size_t)n <= sizeof r->buf, "more bytes than expected");
        memcpy(r->buf + r->got, buf, (size_t)n);
        r->got += (size_t)n;
    } else if (n == 0) {
        ++r->eofs;
    } else {
        ++r->errs;
        r->last_err = n;
    }
}

static inline void on_close(tl_loop *loop, tl_stream *s) {
    (void)loop;
    rec *r = s->data;
    ++r->closes;
    r->close_after_writes = r->writes;
    r->fd_open_at_close = fcntl(s->fd, F_GETFD) >= 0;
}

typedef struct wreq {
    tl_write_req req;
    struct iovec iov[2];
    rec *r;
    int index;
} wreq;

static inline void on_write(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    wreq *w = req->data;
    rec *r = w->r;
    cr_assert(r->writes < 16);
    r->order[r->writes] = w->index;
    r->status[r->writes] = status;
    ++r->writes;
}

static inline void queue_write(tl_loop *loop, tl_stream *s, wreq *w, rec *r, int index,
                               const void *p, size_t n) {
    w->r = r;
    w->index = index;
    w->iov[0].iov_base = (void *)p;
    w->iov[0].iov_len = n;
    w->req.data = w;
    int e = tl_stream_write(loop, s, &w->req, w->iov, 1, on_write);
    cr_assert_eq(e, 0, "tl_stream_write: %s", tl_strerror(e));
    cr_assert_eq(w->req.stream, s);
}

/* Runs the loop until *done becomes non-zero (bounded by a failsafe). */
static inline void run_until(tl_loop *loop, const int *done) {
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 10000);
    while (!*done && !fired) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    tl_timer_stop(loop, &fs);
    cr_assert(!fired, "the loop never got there");
}

/* Runs the loop until at least one byte was read into r (bounded). */
static inline void run_until_data(tl_loop *loop, const rec *r) {
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 10000);
    while (r->got == 0 && !fired) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    tl_timer_stop(loop, &fs);
    cr_assert(!fired, "no data arrived");
}

static inline void run_until_closed(tl_loop *loop, rec *r) {
    run_until(loop, &r->closes);
}

/* Clears r and makes s a stream on fd whose callbacks record into r. */
static inline void rec_stream(tl_stream *s, int fd, rec *r) {
    memset(r, 0, sizeof *r);
    tl_stream_init(s, fd, r);
}

/* Makes a socketpair p and s a stream on p[0] recording into r (cleared);
 * p[1] is the raw peer the test drives. */
static inline void stream_on_pair(tl_stream *s, rec *r, int p[2]) {
    make_pair(p);
    rec_stream(s, p[0], r);
}

/* Closes s (which must accept the close) and runs the loop until its close
 * callback recorded into r. */
static inline void close_and_wait(tl_loop *loop, tl_stream *s, rec *r) {
    int e = tl_stream_close(loop, s, on_close);
    cr_assert_eq(e, 0, "tl_stream_close: %s", tl_strerror(e));
    run_until_closed(loop, r);
}

/* Reads everything from a blocking-capable fd until n bytes arrived. */
static inline void read_exact(int fd, char *out, size_t n) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, out + got, n - got);
        cr_assert(k > 0, "read: %zd %s", k, strerror(errno));
        got += (size_t)k;
    }
    fcntl(fd, F_SETFL, fl);
}

#endif /* TICKLOOP_TESTS_STREAM_HELPERS_H */
