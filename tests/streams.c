/* SPDX-License-Identifier: MIT */
/*
 * Streams and listeners over real sockets (socketpairs and loopback TCP):
 * EOF, reset, half-close, EPIPE without SIGPIPE, writes cancelled by a close
 * in order, closes from callbacks, 1,000 connections into a small buffer
 * ring, a listener at EMFILE (the misuse errors: stream_misuse.c). meson
 * runs this file
 * once per I/O backend (TICKLOOP_IO) and once on io_uring with the
 * readiness path forced (TICKLOOP_URING_STREAMS=readiness); the
 * `differential` tests run one scripted exchange on every backend and path
 * in one process and compare the callback traces.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "loop_helpers.h"
#include "stream_helpers.h"

/* ---- behaviour ----------------------------------------------------------- */

Test(streams, echo_and_eof_on_socketpair) {
    tl_loop *loop = new_loop();
    check_path(loop);
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    cr_assert(write(p[1], "hello ", 6) == 6);
    cr_assert(write(p[1], "world", 5) == 5);
    cr_assert(shutdown(p[1], SHUT_WR) == 0);
    run_until(loop, &r.eofs);
    cr_assert_eq(r.got, 11);
    cr_assert(memcmp(r.buf, "hello world", 11) == 0);
    cr_assert_eq(r.eofs, 1);
    cr_assert_eq(r.errs, 0);
    /* Half-close: the stream still sends after the peer's EOF. */
    static wreq w;
    queue_write(loop, &s, &w, &r, 0, "reply", 5);
    run_until(loop, &r.writes);
    cr_assert_eq(r.status[0], 0);
    char back[5];
    read_exact(p[1], back, 5);
    cr_assert(memcmp(back, "reply", 5) == 0);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.streams_active, 1);
    cr_assert(st.stream_reads >= 1);
    cr_assert_eq(st.stream_writes, 1);
    close_and_wait(loop, &s, &r);
    cr_assert_eq(r.fd_open_at_close, 0, "the fd is closed before the close callback");
    close(p[1]);
    free_loop(loop);
}

Test(streams, reset_is_econnreset) {
    tl_loop *loop = new_loop();
    int c[2];
    tcp_pair(c);
    static rec r;
    tl_stream s;
    rec_stream(&s, c[1], &r);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    cr_assert(write(c[0], "abc", 3) == 3);
    struct linger lg = {1, 0};
    cr_assert(setsockopt(c[0], SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    run_until_data(loop, &r);
    close(c[0]); /* RST */
    run_until(loop, &r.errs);
    cr_assert_eq(r.got, 3);
    cr_assert_eq(r.last_err, -ECONNRESET, "got %td", r.last_err);
    cr_assert_eq(r.eofs, 0);
    close_and_wait(loop, &s, &r);
    free_loop(loop);
}

Test(streams, epipe_without_sigpipe) {
    signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill the test */
    tl_loop *loop = new_loop();
    int c[2];
    tcp_pair(c);
    static rec r;
    tl_stream s;
    rec_stream(&s, c[0], &r);
    close(c[1]);
    static char big[1 << 20];
    static wreq w[3];
    /* The first send may still go out (the peer's RST arrives after it). */
    for (int i = 0; i < 3; ++i) queue_write(loop, &s, &w[i], &r, i, big, sizeof big);
    while (r.writes < 3) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    int pipes = 0;
    for (int i = 0; i < 3; ++i) {
        cr_assert_eq(r.order[i], i);
        cr_assert(r.status[i] == 0 || r.status[i] == -EPIPE || r.status[i] == -ECONNRESET,
                  "status %d", r.status[i]);
        pipes += r.status[i] == -EPIPE;
    }
    cr_assert(pipes >= 1, "no write saw -EPIPE");
    cr_assert_eq(r.status[2], -EPIPE);
    /* Later writes get the error too, without a send. */
    static wreq w4;
    queue_write(loop, &s, &w4, &r, 3, "x", 1);
    run_until(loop, &r.order[3]);
    cr_assert_eq(r.status[3], r.status[2]);
    close_and_wait(loop, &s, &r);
    free_loop(loop);
}

Test(streams, close_cancels_queued_writes_in_order) {
    tl_loop *loop = new_loop();
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    static char big[4 << 20];
    static wreq w[4];
    for (int i = 0; i < 4; ++i) queue_write(loop, &s, &w[i], &r, i, big, sizeof big);
    cr_assert(tl_stream_write_queue_size(&s) > 0);
    cr_assert(tl_stream_write_queue_size(&s) <= 4 * sizeof big);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(r.writes, 0, "nobody reads: no write can have completed");
    cr_assert_eq(tl_stream_close(loop, &s, on_close), 0);
    cr_assert_eq(tl_stream_close(loop, &s, on_close), -EPIPE);
    cr_assert_eq(r.writes, 0, "write callbacks run from the loop, not inside close");
    run_until_closed(loop, &r);
    cr_assert_eq(r.writes, 4);
    for (int i = 0; i < 4; ++i)
        cr_assert_eq(r.order[i], i, "callback %d was req %d", i, r.order[i]);
    /* The first may be in the kernel's hands on io_uring: its own result. */
    for (int i = 1; i < 4; ++i) cr_assert_eq(r.status[i], -ECANCELED);
    cr_assert(r.status[0] == -ECANCELED || r.status[0] == 0, "status %d", r.status[0]);
    cr_assert_eq(r.close_after_writes, 4, "close callback after every write callback");
    cr_assert_eq(tl_stream_write_queue_size(&s), 0);
    close(p[1]);
    free_loop(loop);
}

static void close_in_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    on_read(loop, s, buf, n);
    cr_assert_eq(tl_stream_close(loop, s, on_close), 0);
    cr_assert_eq(tl_stream_read_start(loop, s, on_read), -EPIPE);
}

Test(streams, close_inside_read_callback) {
    tl_loop *loop = new_loop_bufs(256, 4);
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    cr_assert_eq(tl_stream_read_start(loop, &s, close_in_read), 0);
    static char data[4096];
    memset(data, 'a', sizeof data);
    cr_assert(write(p[1], data, sizeof data) == (ssize_t)sizeof data);
    run_until_closed(loop, &r);
    cr_assert_eq(r.got, 256, "one callback of one buffer, then none");
    cr_assert_eq(r.closes, 1);
    /* Nothing more arrives for a closed stream. */
    for (int i = 0; i < 3; ++i) tl_loop_run(loop, TL_RUN_NOWAIT);
    cr_assert_eq(r.got, 256);
    close(p[1]);
    free_loop(loop);
}

static int freed;
static void free_in_close(tl_loop *loop, tl_stream *s) {
    (void)loop;
    ++freed;
    free(s);
}

Test(streams, stream_freed_in_close_callback) {
    tl_loop *loop = new_loop();
    int p[2];
    make_pair(p);
    tl_stream *s = malloc(sizeof *s);
    tl_stream_init(s, p[0], NULL);
    static rec r;
    memset(&r, 0, sizeof r);
    s->data = &r;
    cr_assert_eq(tl_stream_read_start(loop, s, on_read), 0);
    static wreq w;
    queue_write(loop, s, &w, &r, 0, "bye", 3);
    freed = 0;
    cr_assert_eq(tl_stream_close(loop, s, free_in_close), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(freed, 1);
    cr_assert_eq(r.writes, 1);
    close(p[1]);
    free_loop(loop);
}

Test(streams, close_of_a_stream_never_used) {
    tl_loop *loop = new_loop();
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    cr_assert_eq(tl_stream_close(loop, &s, on_close), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(r.closes, 1);
    cr_assert(fcntl(p[0], F_GETFD) < 0, "close closes the fd");
    /* A stream on an fd that is not open closes too (nothing to close). */
    tl_stream_init(&s, -1, &r);
    cr_assert_eq(tl_stream_close(loop, &s, on_close), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(r.closes, 2);
    close(p[1]);
    free_loop(loop);
}

Test(streams, read_stop_keeps_data_for_the_next_start) {
    tl_loop *loop = new_loop_bufs(256, 4);
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    static char data[2000];
    for (size_t i = 0; i < sizeof data; ++i) data[i] = (char)(i * 7);
    cr_assert(write(p[1], data, 100) == 100);
    run_until_data(loop, &r);
    cr_assert_eq(tl_stream_read_stop(loop, &s), 0);
    cr_assert_eq(tl_stream_read_stop(loop, &s), 0);
    cr_assert(write(p[1], data + 100, sizeof data - 100) == (ssize_t)sizeof data - 100);
    size_t before = r.got;
    for (int i = 0; i < 5; ++i) tl_loop_run(loop, TL_RUN_NOWAIT);
    cr_assert_eq(r.got, before, "no read callback after read_stop");
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    shutdown(p[1], SHUT_WR);
    run_until(loop, &r.eofs);
    cr_assert_eq(r.got, sizeof data);
    cr_assert(memcmp(r.buf, data, sizeof data) == 0, "bytes lost or reordered");
    close_and_wait(loop, &s, &r);
    close(p[1]);
    free_loop(loop);
}

/* 32 KiB waiting in the socket, read in 256-byte buffers: the loop takes it
 * all within two iterations (the readiness path from one event; the
 * completion path from its multishot receive), so a reader keeps up with a
 * peer that sends that much per iteration instead of letting its socket fill
 * up. Counted in iterations, not timed. */
Test(streams, one_event_takes_what_the_socket_holds) {
    tl_loop *loop = new_loop_bufs(256, 256);
    check_path(loop);
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    static char data[32768];
    for (size_t i = 0; i < sizeof data; ++i) data[i] = (char)(i * 7);
    cr_assert(write(p[1], data, sizeof data) == (ssize_t)sizeof data);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    tl_loop_stats before, after;
    tl_loop_stats_get(loop, &before);
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 10000);
    while (r.got < sizeof data && !fired) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    tl_timer_stop(loop, &fs);
    cr_assert(!fired, "the data never arrived");
    tl_loop_stats_get(loop, &after);
    uint64_t iterations = after.iterations - before.iterations;
    cr_assert(iterations <= 2, "%llu iterations for 32 KiB in 256-byte reads",
              (unsigned long long)iterations);
    cr_assert(memcmp(r.buf, data, sizeof data) == 0, "bytes lost or reordered");
    close_and_wait(loop, &s, &r);
    close(p[1]);
    free_loop(loop);
}

/* ---- 1,000 connections into 16 buffers ----------------------------------- */

enum { kConns = 1000, kBytesPerConn = 20000 };

typedef struct conn {
    tl_stream server, client;
    tl_write_req req;
    struct iovec iov[3];
    size_t got;
    int eof, closed, bad;
} conn;

static conn *conns;
static int eofs_total, closes_total, accepted;
static char *pattern; /* kConns + kBytesPerConn bytes: conn i sends pattern + i */

static void conn_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    conn *c = s->data;
    if (n > 0) {
        size_t i = (size_t)(c - conns);
        if (c->got + (size_t)n > kBytesPerConn || memcmp(buf, pattern + i + c->got, (size_t)n) != 0)
            c->bad = 1;
        c->got += (size_t)n;
        return;
    }
    cr_assert_eq(n, 0, "conn read error %td", n);
    c->eof = 1;
    ++eofs_total;
    tl_stream_close(loop, s, NULL);
}

static void conn_written(tl_loop *loop, tl_write_req *req, int status) {
    cr_assert_eq(status, 0);
    shutdown(req->stream->fd, SHUT_WR);
    tl_stream_close(loop, req->stream, NULL);
}

static void conn_accept(tl_loop *loop, tl_listener *l, int fd) {
    (void)l;
    cr_assert(fd >= 0, "accept: %s", tl_strerror(fd));
    /* The peer's port says which connection this is: map through a table
       built at connect time would cost more; accepted order is fine since
       the pattern check names conns by accept order on both ends. */
    conn *c = &conns[accepted++];
    tl_stream_init(&c->server, fd, c);
    cr_assert_eq(tl_stream_read_start(loop, &c->server, conn_read), 0);
}

Test(streams, thousand_connections_into_sixteen_buffers, .timeout = 120) {
    tl_loop *loop = new_loop_bufs(1024, 16);
    check_path(loop);
    conns = calloc(kConns, sizeof *conns);
    pattern = malloc(kConns + kBytesPerConn);
    for (size_t i = 0; i < kConns + kBytesPerConn; ++i) pattern[i] = (char)(i * 131 + (i >> 8));
    eofs_total = closes_total = accepted = 0;
    struct sockaddr_in addr;
    int lfd = tcp_listener(&addr, 1024);
    /* Connect all first (the backlog takes them), accept them in order:
       the k-th accepted is the k-th connected. */
    int cfd[kConns];
    for (int i = 0; i < kConns; ++i) cfd[i] = tcp_connect(&addr);
    tl_listener l;
    memset(&l, 0, sizeof l);
    cr_assert_eq(tl_listener_start(loop, &l, lfd, conn_accept, NULL), 0);
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 60000);
    while (accepted < kConns && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    cr_assert_eq(accepted, kConns);
    cr_assert_eq(tl_listener_stop(loop, &l), 0);
    /* All send at once, each in three pieces. */
    for (int i = 0; i < kConns; ++i) {
        conn *c = &conns[i];
        tl_stream_init(&c->client, cfd[i], c);
        c->iov[0].iov_base = pattern + i;
        c->iov[0].iov_len = 1000;
        c->iov[1].iov_base = pattern + i + 1000;
        c->iov[1].iov_len = 9000;
        c->iov[2].iov_base = pattern + i + 10000;
        c->iov[2].iov_len = kBytesPerConn - 10000;
        cr_assert_eq(tl_stream_write(loop, &c->client, &c->req, c->iov, 3, conn_written), 0);
    }
    while (eofs_total < kConns && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    tl_timer_stop(loop, &fs);
    cr_assert(!fired, "only %d of %d connections finished", eofs_total, kConns);
    for (int i = 0; i < kConns; ++i) {
        cr_assert_eq(conns[i].got, kBytesPerConn, "conn %d got %zu", i, conns[i].got);
        cr_assert_eq(conns[i].bad, 0, "conn %d: bytes lost or reordered", i);
    }
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0); /* the closes */
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.streams_active, 0);
    cr_assert_eq(st.accepts, kConns);
    if (strcmp(tl_loop_stream_path(loop), "completion") == 0)
        cr_assert(st.buffer_ring_exhausted > 0, "16 buffers for 1000 senders never ran dry?");
    close(lfd);
    free_loop(loop);
    free(conns);
    free(pattern);
}

/* ---- a listener at EMFILE ------------------------------------------------ */

static int emfile_errors, emfile_accepted;
static void emfile_accept(tl_loop *loop, tl_listener *l, int fd) {
    (void)loop;
    (void)l;
    if (fd < 0) {
        cr_assert_eq(fd, -EMFILE, "accept error %d %s", fd, tl_strerror(fd));
        ++emfile_errors;
        return;
    }
    ++emfile_accepted;
    close(fd);
}

static void count_iterations_stop(tl_loop *loop, tl_timer *t) {
    (void)t;
    tl_loop_stop(loop);
}

/* valgrind enforces a lowered RLIMIT_NOFILE itself, after the system call:
   an accept4 whose new fd is above its limit is closed and turned into
   EMFILE, so the connection is lost instead of waiting in the backlog. */
static int under_valgrind(void) {
    const char *preload = getenv("LD_PRELOAD");
    return preload && strstr(preload, "vgpreload") != NULL;
}

Test(streams, listener_at_emfile_pauses_and_resumes) {
    if (under_valgrind()) cr_skip_test("valgrind emulates RLIMIT_NOFILE and drops connections");
    tl_loop *loop = new_loop();
    struct sockaddr_in addr;
    int lfd = tcp_listener(&addr, 64);
    tl_listener l;
    memset(&l, 0, sizeof l);
    cr_assert_eq(tl_listener_start(loop, &l, lfd, emfile_accept, NULL), 0);
    int c1 = tcp_connect(&addr);
    /* Use up every descriptor below a lowered limit. */
    struct rlimit old, lim;
    getrlimit(RLIMIT_NOFILE, &old);
    int hog[64], nhog = 0;
    int top = dup(0);
    cr_assert(top >= 0);
    close(top);
    lim = old;
    lim.rlim_cur = (rlim_t)top + 8;
    cr_assert(setrlimit(RLIMIT_NOFILE, &lim) == 0);
    for (;;) {
        int fd = dup(0);
        if (fd < 0) break;
        cr_assert(nhog < 64);
        hog[nhog++] = fd;
    }
    emfile_errors = emfile_accepted = 0;
    tl_loop_stats before, after;
    tl_loop_stats_get(loop, &before);
    tl_timer stop;
    tl_timer_init(&stop, count_iterations_stop, NULL);
    tl_timer_start(loop, &stop, 300 * MS, 0);
    tl_loop_run(loop, TL_RUN_DEFAULT);
    tl_loop_stats_get(loop, &after);
    cr_assert(emfile_errors >= 1, "no -EMFILE reported");
    cr_assert_eq(emfile_accepted, 0);
    /* A spinning listener iterates hundreds of thousands of times in 300 ms;
       a paused one wakes for its retries only. */
    uint64_t iters = after.iterations - before.iterations;
    cr_assert(iters < 200, "%llu iterations at EMFILE: the listener spins",
              (unsigned long long)iters);
    cr_assert(emfile_errors < 100, "%d EMFILE callbacks", emfile_errors);
    /* Free descriptors: accepting resumes. */
    for (int i = 0; i < nhog; ++i) close(hog[i]);
    setrlimit(RLIMIT_NOFILE, &old);
    int c2 = tcp_connect(&addr);
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 10000);
    while (emfile_accepted < 2 && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    cr_assert_eq(emfile_accepted, 2, "accepting did not resume: %d accepted, %d errors",
                 emfile_accepted, emfile_errors);
    tl_timer_stop(loop, &fs);
    cr_assert_eq(tl_listener_stop(loop, &l), 0);
    close(c1);
    close(c2);
    close(lfd);
    free_loop(loop);
}

/* ---- references ------------------------------------------------------------ */

Test(streams, unreferenced_stream_and_listener_do_not_keep_the_loop) {
    tl_loop *loop = new_loop();
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    cr_assert_eq(tl_stream_set_ref(loop, &s, 0), 0);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    struct sockaddr_in addr;
    int lfd = tcp_listener(&addr, 4);
    tl_listener l;
    memset(&l, 0, sizeof l);
    cr_assert_eq(tl_listener_set_ref(loop, &l, 0), 0);
    cr_assert_eq(tl_listener_start(loop, &l, lfd, emfile_accept, NULL), 0);
    cr_assert_eq(tl_loop_alive(loop), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(tl_loop_free(loop), -EBUSY, "still active handles");
    cr_assert_eq(tl_stream_set_ref(loop, &s, 1), 0);
    cr_assert_eq(tl_loop_alive(loop), 1);
    check_loop(loop);
    cr_assert_eq(tl_listener_stop(loop, &l), 0);
    cr_assert_eq(tl_stream_close(loop, &s, on_close), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(r.closes, 1);
    close(lfd);
    close(p[1]);
    free_loop(loop);
}

/* ---- fork ------------------------------------------------------------------- */

#include <sys/wait.h>

static int child_accepted;
static void child_accept(tl_loop *loop, tl_listener *l, int fd) {
    (void)loop;
    (void)l;
    if (fd >= 0) {
        ++child_accepted;
        close(fd);
    }
}

Test(streams, stream_and_listener_survive_fork) {
    tl_loop *loop = new_loop();
    int p[2];
    static rec r;
    tl_stream s;
    stream_on_pair(&s, &r, p);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    struct sockaddr_in addr;
    int lfd = tcp_listener(&addr, 8);
    tl_listener l;
    memset(&l, 0, sizeof l);
    cr_assert_eq(tl_listener_start(loop, &l, lfd, child_accept, NULL), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        alarm(10);
        CHILD_CHECK(tl_loop_fork(loop) == 0);
        CHILD_CHECK(write(p[1], "child", 5) == 5);
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHILD_CHECK(connect(c, (struct sockaddr *)&addr, sizeof addr) == 0);
        while (r.got < 5 || child_accepted < 1) CHILD_CHECK(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
        CHILD_CHECK(memcmp(r.buf, "child", 5) == 0);
        static wreq w;
        w.r = &r;
        w.iov[0].iov_base = (void *)"back";
        w.iov[0].iov_len = 4;
        w.req.data = &w;
        CHILD_CHECK(tl_stream_write(loop, &s, &w.req, w.iov, 1, on_write) == 0);
        while (r.writes < 1) CHILD_CHECK(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
        CHILD_CHECK(r.status[0] == 0);
        _exit(0);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
    char back[4];
    read_exact(p[1], back, 4);
    cr_assert(memcmp(back, "back", 4) == 0);
    /* The parent's loop goes on as before. */
    cr_assert_eq(tl_listener_stop(loop, &l), 0);
    cr_assert(write(p[1], "parent", 6) == 6);
    while (r.got < 6) cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
    cr_assert(memcmp(r.buf, "parent", 6) == 0);
    close_and_wait(loop, &s, &r);
    close(p[1]);
    close(lfd);
    free_loop(loop);
}

/* ---- differential: one script, every backend and path, same trace --------- */

/* What one stream saw, in order. Consecutive reads are merged: how the bytes
   are cut into callbacks depends on the path (one buffer per receive on
   io_uring). The interleaving of two streams' callbacks is not compared:
   a completion and a readiness event of one iteration may run in either
   order. */
typedef struct trace {
    char text[4096];
    size_t len;
    size_t got; /* bytes read in all */
    int in_data;
} trace;

static void trace_add(trace *t, const char *what, long v) {
    t->in_data = 0;
    t->len += (size_t)snprintf(t->text + t->len, sizeof t->text - t->len, "%s(%ld) ", what, v);
}

typedef struct side {
    tl_stream s;
    trace t;
    int eof, errs, closed, writes;
} side;

static void side_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    (void)loop;
    side *d = s->data;
    trace *t = &d->t;
    if (n > 0) {
        if (!t->in_data)
            t->len += (size_t)snprintf(t->text + t->len, sizeof t->text - t->len, "data:");
        t->in_data = 1;
        t->len += (size_t)snprintf(t->text + t->len, sizeof t->text - t->len, "%.*s", (int)n,
                                   (const char *)buf);
        t->got += (size_t)n;
        return;
    }
    trace_add(t, n == 0 ? " eof" : " err", (long)n);
    if (n == 0)
        ++d->eof;
    else
        ++d->errs;
}

static void side_write(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    side *d = req->stream->data;
    trace_add(&d->t, " write", status);
    ++d->writes;
}

static void side_close(tl_loop *loop, tl_stream *s) {
    (void)loop;
    side *d = s->data;
    trace_add(&d->t, " close", 0);
    ++d->closed;
}

/* Runs the script; returns 0, or the error that kept the loop from being
   created (io_uring missing). a and b get the two streams' traces. */
static int run_script(tl_io_kind io, const char *streams_env, side *a, side *b) {
    tl_loop *loop;
    int e = new_stream_loop(&loop, io, streams_env, 256, 4);
    memset(a, 0, sizeof *a);
    memset(b, 0, sizeof *b);
    if (e < 0) return e;
    int p[2];
    make_pair(p);
    tl_stream_init(&a->s, p[0], a);
    tl_stream_init(&b->s, p[1], b);
    cr_assert_eq(tl_stream_read_start(loop, &a->s, side_read), 0);
    cr_assert_eq(tl_stream_read_start(loop, &b->s, side_read), 0);
    tl_timer fs;
    int fired;
    start_failsafe(loop, &fs, &fired, 10000);
    /* 1: a sends three requests (the second of two iovecs, one empty): more
       than the 4 buffers of 256 bytes hold. */
    static char big[1200];
    for (size_t i = 0; i < sizeof big; ++i) big[i] = (char)('A' + i % 26);
    struct iovec v1[1] = {{big, 700}};
    struct iovec v2[2] = {{(void *)"", 0}, {big + 700, 300}};
    struct iovec v3[1] = {{big + 1000, 200}};
    tl_write_req w1, w2, w3, w4, w5;
    cr_assert_eq(tl_stream_write(loop, &a->s, &w1, v1, 1, side_write), 0);
    cr_assert_eq(tl_stream_write(loop, &a->s, &w2, v2, 2, side_write), 0);
    cr_assert_eq(tl_stream_write(loop, &a->s, &w3, v3, 1, side_write), 0);
    while ((a->writes < 3 || b->t.got < 1200) && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    /* 2: b answers and half-closes: a sees the data, then EOF. */
    struct iovec v4[1] = {{(void *)"pong", 4}};
    cr_assert_eq(tl_stream_write(loop, &b->s, &w4, v4, 1, side_write), 0);
    while (b->writes < 1 && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    shutdown(p[1], SHUT_WR);
    while (!a->eof && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    /* 3: b stops reading; a sends; nothing arrives until b reads again. */
    cr_assert_eq(tl_stream_read_stop(loop, &b->s), 0);
    struct iovec v5[1] = {{(void *)"after-eof", 9}};
    cr_assert_eq(tl_stream_write(loop, &a->s, &w5, v5, 1, side_write), 0);
    while (a->writes < 4 && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    for (int i = 0; i < 3; ++i) tl_loop_run(loop, TL_RUN_NOWAIT);
    trace_add(&b->t, " restart", 0);
    cr_assert_eq(tl_stream_read_start(loop, &b->s, side_read), 0);
    while (b->t.got < 1209 && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    /* 4: a closes; b sees EOF; b closes. */
    cr_assert_eq(tl_stream_close(loop, &a->s, side_close), 0);
    while ((!a->closed || !b->eof) && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    cr_assert_eq(tl_stream_close(loop, &b->s, side_close), 0);
    while (!b->closed && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    tl_timer_stop(loop, &fs);
    cr_assert(!fired, "script stuck: a: %s b: %s", a->t.text, b->t.text);
    free_loop(loop);
    return 0;
}

Test(differential, same_trace_on_every_backend_and_path) {
    static side ea, eb, ua, ub, ra, rb;
    cr_assert_eq(run_script(TL_IO_EPOLL, NULL, &ea, &eb), 0);
    cr_log_info("epoll a: %s", ea.t.text);
    cr_log_info("epoll b: %s", eb.t.text);
    cr_assert(strstr(ea.t.text, "data:pong eof(0)") != NULL, "epoll a: %s", ea.t.text);
    cr_assert(strstr(eb.t.text, " restart(0) data:after-eof eof(0)") != NULL, "epoll b: %s",
              eb.t.text);
    /* Compared against the backend this run is for (meson runs the file
       per backend; under valgrind only epoll, whose checks cannot follow
       io_uring's writes into the buffer ring). */
    const char *io = getenv("TICKLOOP_IO");
    if (io && strcmp(io, "epoll") == 0) return;
    if (run_script(TL_IO_URING, NULL, &ua, &ub) == 0) {
        cr_assert_str_eq(ua.t.text, ea.t.text, "io_uring a differs from epoll");
        cr_assert_str_eq(ub.t.text, eb.t.text, "io_uring b differs from epoll");
    }
    if (run_script(TL_IO_URING, "readiness", &ra, &rb) == 0) {
        cr_assert_str_eq(ra.t.text, ea.t.text, "io_uring (readiness) a differs from epoll");
        cr_assert_str_eq(rb.t.text, eb.t.text, "io_uring (readiness) b differs from epoll");
    }
}
