/* SPDX-License-Identifier: MIT */
/*
 * Client streams: tl_stream_connect and tl_stream_shutdown over IPv4, IPv6
 * (skipped where ::1 cannot be bound) and UNIX sockets. Ports of libuv's
 * own tests of uv_tcp_connect and uv_shutdown, to tl_stream's terms:
 * connection refused (test-connection-fail, test-tcp-connect-error,
 * test-pipe-connect-error), close while connecting
 * (test-tcp-close-while-connecting), write before and after connect
 * (test-tcp-write-after-connect, test-tcp-connect-error-after-write),
 * shutdown after write (test-tcp-shutdown-after-write), shutdown twice
 * (test-shutdown-twice), shutdown then close (test-shutdown-close), EOF
 * after shutdown (test-shutdown-eof) and many clients at once
 * (test-delayed-accept, benchmark-connect's many connects), plus the
 * misuse errors. Each test records its callbacks as a trace of letters, so
 * that order is checked as strictly as results. meson runs the file once per
 * I/O backend and once on io_uring's readiness path.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "loop_helpers.h"

/* ---- addresses ----------------------------------------------------------- */

enum { FAM_V4, FAM_V6, FAM_UNIX, FAM_COUNT };
static const char *const kFamName[FAM_COUNT] = {"ipv4", "ipv6", "unix"};

typedef struct where {
    struct sockaddr_storage ss;
    socklen_t len;
    int family; /* AF_* */
} where;

static char unix_dir[64];

/* A UNIX path of the test's own directory. */
static void unix_path(where *w, const char *name) {
    if (!unix_dir[0]) {
        strcpy(unix_dir, "/tmp/tl-connect-XXXXXX");
        cr_assert(mkdtemp(unix_dir) != NULL, "mkdtemp: %s", strerror(errno));
    }
    struct sockaddr_un *sun = (struct sockaddr_un *)&w->ss;
    memset(w, 0, sizeof *w);
    sun->sun_family = AF_UNIX;
    snprintf(sun->sun_path, sizeof sun->sun_path, "%s/%s", unix_dir, name);
    unlink(sun->sun_path);
    w->len = (socklen_t)sizeof *sun;
    w->family = AF_UNIX;
}

/* The loopback address of fam, port 0 (UNIX: a fresh path). */
static void loopback(int fam, where *w) {
    static int n;
    memset(w, 0, sizeof *w);
    if (fam == FAM_V4) {
        struct sockaddr_in *in = (struct sockaddr_in *)&w->ss;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        w->len = sizeof *in;
        w->family = AF_INET;
    } else if (fam == FAM_V6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&w->ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
        w->len = sizeof *in6;
        w->family = AF_INET6;
    } else {
        char name[32];
        snprintf(name, sizeof name, "s%d", n++);
        unix_path(w, name);
    }
}

static int new_socket(int family) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    return fd;
}

/* A socket bound to fam's loopback, listening with backlog unless backlog
 * is < 0; *w gets its address. -1 when fam cannot be bound here (IPv6). */
static int bound_socket(int fam, where *w, int backlog) {
    loopback(fam, w);
    int fd = new_socket(w->family);
    if (bind(fd, (struct sockaddr *)&w->ss, w->len) < 0) {
        cr_assert(fam == FAM_V6, "bind %s: %s", kFamName[fam], strerror(errno));
        close(fd);
        return -1;
    }
    socklen_t len = sizeof w->ss;
    cr_assert(getsockname(fd, (struct sockaddr *)&w->ss, &len) == 0);
    if (w->family != AF_UNIX) w->len = len;
    if (backlog >= 0) cr_assert(listen(fd, backlog) == 0, "listen: %s", strerror(errno));
    return fd;
}

static void unbind_socket(int fd, const where *w) {
    close(fd);
    if (w->family == AF_UNIX) unlink(((const struct sockaddr_un *)&w->ss)->sun_path);
}

/* ---- a client that records its callbacks ------------------------------- */

typedef struct client {
    tl_stream s;
    tl_write_req req[4];
    struct iovec iov[4];
    char trace[64]; /* C connect, W write, S shutdown, R data, E EOF, X read error, Z close */
    int ntrace;
    int connect_status, shutdown_status, read_error;
    int write_status[4];
    int writes;
    int queued; /* requests queued */
    size_t got;
    char buf[256];
    int close_in_connect; /* tl_stream_close from the connect callback */
} client;

static void mark(client *c, char what) {
    cr_assert(c->ntrace + 1 < (int)sizeof c->trace, "trace too long: %s", c->trace);
    c->trace[c->ntrace++] = what;
}

static void on_connect(tl_loop *loop, tl_stream *s, int status) {
    client *c = s->data;
    mark(c, 'C');
    c->connect_status = status;
    if (c->close_in_connect) cr_assert_eq(tl_stream_close(loop, s, NULL), 0);
}

static void on_write(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    client *c = req->data;
    mark(c, 'W');
    c->write_status[c->writes++] = status;
}

static void on_shutdown(tl_loop *loop, tl_stream *s, int status) {
    (void)loop;
    client *c = s->data;
    mark(c, 'S');
    c->shutdown_status = status;
}

static void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    (void)loop;
    client *c = s->data;
    if (n > 0) {
        if (c->ntrace == 0 || c->trace[c->ntrace - 1] != 'R') mark(c, 'R');
        size_t take = (size_t)n < sizeof c->buf - c->got ? (size_t)n : sizeof c->buf - c->got;
        memcpy(c->buf + c->got, buf, take);
        c->got += (size_t)n;
        return;
    }
    mark(c, n == 0 ? 'E' : 'X');
    if (n < 0) c->read_error = (int)n;
}

static void on_client_close(tl_loop *loop, tl_stream *s) {
    (void)loop;
    mark(s->data, 'Z');
}

static void client_init(client *c, int family) {
    memset(c, 0, sizeof *c);
    tl_stream_init(&c->s, new_socket(family), c);
    for (int i = 0; i < 4; ++i) c->req[i].data = c;
}

static void client_write(tl_loop *loop, client *c, const char *text) {
    int i = c->queued++ % 4;
    c->iov[i].iov_base = (void *)text;
    c->iov[i].iov_len = strlen(text);
    cr_assert_eq(tl_stream_write(loop, &c->s, &c->req[i], &c->iov[i], 1, on_write), 0);
}

static int connect_to(tl_loop *loop, client *c, const where *w) {
    return tl_stream_connect(loop, &c->s, (const struct sockaddr *)&w->ss, w->len, on_connect);
}

/* Runs until the trace is `want` long (a failsafe ends a run that hangs). */
static void run_until_trace(tl_loop *loop, client *c, size_t want) {
    tl_timer failsafe;
    int fired;
    start_failsafe(loop, &failsafe, &fired, 10000);
    while (strlen(c->trace) < want && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    tl_timer_stop(loop, &failsafe);
    cr_assert(!fired, "timed out; trace so far \"%s\"", c->trace);
}

static void close_and_finish(tl_loop *loop, client *c) {
    if (!strchr(c->trace, 'Z')) {
        cr_assert_eq(tl_stream_close(loop, &c->s, on_client_close), 0);
        run_to_end(loop);
    }
}

/* ---- connect ------------------------------------------------------------- */

/* Reads, writes and a shutdown asked for before the connect completes go
 * out once it does, in order; the server (a plain socket) sees the bytes
 * then EOF, answers, and the client reads the answer then EOF. */
static void before_connect(int fam) {
    where w;
    int lfd = bound_socket(fam, &w, 8);
    if (lfd < 0) return;
    tl_loop *loop = new_loop();
    client c;
    client_init(&c, w.family);
    cr_assert_eq(connect_to(loop, &c, &w), 0);
    cr_assert_str_eq(c.trace, "", "a callback ran inside tl_stream_connect");
    cr_assert_eq(tl_stream_read_start(loop, &c.s, on_read), 0);
    client_write(loop, &c, "ping ");
    client_write(loop, &c, "pong");
    cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), 0);
    run_until_trace(loop, &c, 4);
    cr_assert_str_eq(c.trace, "CWWS", "%s", kFamName[fam]);
    cr_assert_eq(c.connect_status, 0, "%s", tl_strerror(c.connect_status));
    cr_assert_eq(c.write_status[0] | c.write_status[1] | c.shutdown_status, 0);

    int sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    cr_assert(sfd >= 0);
    char got[32] = {0};
    size_t have = 0;
    ssize_t n;
    while ((n = read(sfd, got + have, sizeof got - 1 - have)) > 0) have += (size_t)n;
    cr_assert_eq(n, 0, "the server reads EOF after the bytes");
    cr_assert_str_eq(got, "ping pong");
    cr_assert_eq(write(sfd, "answer", 6), 6);
    close(sfd);
    run_until_trace(loop, &c, 6);
    cr_assert_str_eq(c.trace, "CWWSRE");
    cr_assert_eq(c.got, 6);
    cr_assert(memcmp(c.buf, "answer", 6) == 0);
    close_and_finish(loop, &c);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.connects, 1);
    free_loop(loop);
    unbind_socket(lfd, &w);
}

Test(stream_connect, write_and_shutdown_before_connect) {
    for (int fam = 0; fam < FAM_COUNT; ++fam) before_connect(fam);
}

static void on_connect_write(tl_loop *loop, tl_stream *s, int status) {
    on_connect(loop, s, status);
    if (status == 0) client_write(loop, s->data, "after");
}

/* A write from the connect callback (libuv's test-tcp-write-after-connect). */
Test(stream_connect, write_after_connect) {
    for (int fam = 0; fam < FAM_COUNT; ++fam) {
        where w;
        int lfd = bound_socket(fam, &w, 8);
        if (lfd < 0) continue;
        tl_loop *loop = new_loop();
        client c;
        client_init(&c, w.family);
        cr_assert_eq(
            tl_stream_connect(loop, &c.s, (struct sockaddr *)&w.ss, w.len, on_connect_write), 0);
        run_until_trace(loop, &c, 2);
        cr_assert_str_eq(c.trace, "CW");
        cr_assert_eq(c.write_status[0], 0);
        int sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        char got[8] = {0};
        cr_assert_eq(read(sfd, got, 5), 5);
        cr_assert_str_eq(got, "after");
        close(sfd);
        close_and_finish(loop, &c);
        cr_assert_str_eq(c.trace, "CWZ");
        free_loop(loop);
        unbind_socket(lfd, &w);
    }
}

/* Nobody listens: the callback gets the refusal, then the queued writes and
 * the reader get the same error, the shutdown too, in that order. */
static void refused(int fam, int expect, const where *w) {
    tl_loop *loop = new_loop();
    client c;
    client_init(&c, w->family);
    cr_assert_eq(connect_to(loop, &c, w), 0, "%s", kFamName[fam]);
    cr_assert_eq(tl_stream_read_start(loop, &c.s, on_read), 0);
    client_write(loop, &c, "lost");
    cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), 0);
    run_until_trace(loop, &c, 4);
    cr_assert_str_eq(c.trace, "CWXS", "%s", kFamName[fam]);
    cr_assert_eq(c.connect_status, expect, "%s: %s", kFamName[fam], tl_strerror(c.connect_status));
    cr_assert_eq(c.write_status[0], expect);
    cr_assert_eq(c.read_error, expect);
    cr_assert_eq(c.shutdown_status, expect);
    /* The stream is neither connected nor connecting any more. */
    cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), -EPIPE);
    close_and_finish(loop, &c);
    cr_assert_str_eq(c.trace, "CWXSZ");
    free_loop(loop);
}

Test(stream_connect, connection_refused) {
    for (int fam = 0; fam < FAM_COUNT; ++fam) {
        where w;
        int fd = bound_socket(fam, &w, -1); /* bound, never listening */
        if (fd < 0) continue;
        if (fam != FAM_UNIX) close(fd); /* the port is free again */
        refused(fam, -ECONNREFUSED, &w);
        if (fam == FAM_UNIX) unbind_socket(fd, &w);
    }
    where w;
    unix_path(&w, "nobody");
    refused(FAM_UNIX, -ENOENT, &w);
}

/* A TCP listener whose accept queue is full drops SYNs: a connect to it
 * stays under way (the kernel retries after a second), so a close finds it
 * still connecting. *fillers are the connections that fill the queue. */
static int full_listener(int fam, where *w, int fillers[2]) {
    int lfd = bound_socket(fam, w, 0);
    if (lfd < 0) return -1;
    for (int i = 0; i < 2; ++i) {
        fillers[i] = new_socket(w->family);
        int fl = fcntl(fillers[i], F_GETFL);
        fcntl(fillers[i], F_SETFL, fl | O_NONBLOCK);
        connect(fillers[i], (struct sockaddr *)&w->ss, w->len);
    }
    /* The first filler's handshake fills the queue (backlog 0 holds one);
       the second one's SYN is dropped, as the stream's will be. */
    struct pollfd pfd = {.fd = fillers[0], .events = POLLOUT};
    cr_assert_eq(poll(&pfd, 1, 5000), 1, "the first filler never connected");
    return lfd;
}

/* Closing a connecting stream cancels its connect, its writes and its
 * shutdown, in that order, before the close callback; closing at once or a
 * few iterations later, and from the connect callback of a UNIX connect
 * (which completes at once). */
Test(stream_connect, close_while_connecting) {
    for (int fam = FAM_V4; fam <= FAM_V6; ++fam) {
        for (int later = 0; later < 2; ++later) {
            where w;
            int fillers[2];
            int lfd = full_listener(fam, &w, fillers);
            if (lfd < 0) continue;
            tl_loop *loop = new_loop();
            client c;
            client_init(&c, w.family);
            cr_assert_eq(connect_to(loop, &c, &w), 0);
            cr_assert_eq(tl_stream_read_start(loop, &c.s, on_read), 0);
            client_write(loop, &c, "never");
            cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), 0);
            for (int i = 0; i < 3 * later; ++i) tl_loop_run(loop, TL_RUN_NOWAIT);
            cr_assert_str_eq(c.trace, "", "%s: the connect ended: %s", kFamName[fam],
                             tl_strerror(c.connect_status));
            cr_assert_eq(tl_stream_close(loop, &c.s, on_client_close), 0);
            run_to_end(loop);
            cr_assert_str_eq(c.trace, "CWSZ", "%s", kFamName[fam]);
            cr_assert_eq(c.connect_status, -ECANCELED);
            cr_assert_eq(c.write_status[0], -ECANCELED);
            cr_assert_eq(c.shutdown_status, -ECANCELED);
            free_loop(loop);
            close(fillers[0]);
            close(fillers[1]);
            close(lfd);
        }
    }
}

Test(stream_connect, close_from_connect_callback) {
    for (int fam = 0; fam < FAM_COUNT; ++fam) {
        where w;
        int lfd = bound_socket(fam, &w, 8);
        if (lfd < 0) continue;
        tl_loop *loop = new_loop();
        client c;
        client_init(&c, w.family);
        c.close_in_connect = 1;
        cr_assert_eq(connect_to(loop, &c, &w), 0);
        client_write(loop, &c, "never");
        run_to_end(loop);
        cr_assert_str_eq(c.trace, "CW");
        cr_assert_eq(c.connect_status, 0);
        cr_assert_eq(c.write_status[0], -ECANCELED);
        free_loop(loop);
        unbind_socket(lfd, &w);
    }
}

/* ---- shutdown ------------------------------------------------------------ */

/* A connected pair: *loop a new loop, c connected by it, *sfd the accepted
 * end. False (nothing left open) when fam cannot be bound here. */
static int connected_pair(tl_loop **loop, int fam, client *c, where *w, int *lfd, int *sfd) {
    *lfd = bound_socket(fam, w, 8);
    if (*lfd < 0) return 0;
    *loop = new_loop();
    client_init(c, w->family);
    cr_assert_eq(connect_to(*loop, c, w), 0);
    run_until_trace(*loop, c, 1);
    cr_assert_eq(c->connect_status, 0);
    *sfd = accept4(*lfd, NULL, NULL, SOCK_CLOEXEC);
    cr_assert(*sfd >= 0);
    c->ntrace = 0;
    memset(c->trace, 0, sizeof c->trace);
    return 1;
}

/* 4 MiB written, then a shutdown: the shutdown waits for the bytes, its
 * callback comes after the write's, and the server reads every byte, then
 * EOF (test-tcp-shutdown-after-write). */
Test(stream_connect, shutdown_after_write, .timeout = 60) {
    enum { kBytes = 4 << 20 };
    char *big = malloc(kBytes);
    for (size_t i = 0; i < kBytes; ++i) big[i] = (char)(i * 7);
    for (int fam = 0; fam < FAM_COUNT; ++fam) {
        tl_loop *loop;
        client c;
        where w;
        int lfd, sfd;
        if (!connected_pair(&loop, fam, &c, &w, &lfd, &sfd)) continue;
        struct iovec v = {big, kBytes};
        cr_assert_eq(tl_stream_write(loop, &c.s, &c.req[0], &v, 1, on_write), 0);
        cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), 0);
        struct iovec late = {"x", 1};
        cr_assert_eq(tl_stream_write(loop, &c.s, &c.req[1], &late, 1, on_write), -EPIPE);
        /* The server drains while the loop sends: one non-blocking read per
           iteration. */
        fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
        size_t have = 0;
        int eof = 0, bad = 0;
        char chunk[65536];
        tl_timer failsafe;
        int fired;
        start_failsafe(loop, &failsafe, &fired, 30000);
        while (!eof && !fired) {
            tl_loop_run(loop, TL_RUN_NOWAIT);
            ssize_t n;
            while ((n = read(sfd, chunk, sizeof chunk)) > 0) {
                for (ssize_t i = 0; i < n; ++i) bad |= chunk[i] != (char)((have + i) * 7);
                have += (size_t)n;
            }
            eof = n == 0;
        }
        tl_timer_stop(loop, &failsafe);
        cr_assert(eof && !bad && have == kBytes, "%s: %zu bytes, eof %d", kFamName[fam], have, eof);
        run_until_trace(loop, &c, 2);
        cr_assert_str_eq(c.trace, "WS", "%s", kFamName[fam]);
        cr_assert_eq(c.write_status[0] | c.shutdown_status, 0);
        close(sfd);
        close_and_finish(loop, &c);
        free_loop(loop);
        unbind_socket(lfd, &w);
    }
    free(big);
}

/* A second shutdown is refused and only the first calls back
 * (test-shutdown-twice); so is a write after it. */
Test(stream_connect, shutdown_twice) {
    for (int fam = 0; fam < FAM_COUNT; ++fam) {
        tl_loop *loop;
        client c;
        where w;
        int lfd, sfd;
        if (!connected_pair(&loop, fam, &c, &w, &lfd, &sfd)) continue;
        cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), 0);
        cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), -EPIPE);
        run_until_trace(loop, &c, 1);
        cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), -EPIPE);
        struct iovec v = {"x", 1};
        cr_assert_eq(tl_stream_write(loop, &c.s, &c.req[0], &v, 1, on_write), -EPIPE);
        char b;
        cr_assert_eq(read(sfd, &b, 1), 0, "the peer reads EOF");
        close(sfd);
        close_and_finish(loop, &c);
        cr_assert_str_eq(c.trace, "SZ");
        cr_assert_eq(c.shutdown_status, 0);
        free_loop(loop);
        unbind_socket(lfd, &w);
    }
}

/* A close right after a shutdown cancels it: the write's callback, the
 * shutdown's, then the close's (test-shutdown-close). */
Test(stream_connect, shutdown_then_close) {
    for (int fam = 0; fam < FAM_COUNT; ++fam) {
        tl_loop *loop;
        client c;
        where w;
        int lfd, sfd;
        if (!connected_pair(&loop, fam, &c, &w, &lfd, &sfd)) continue;
        client_write(loop, &c, "bytes");
        cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), 0);
        cr_assert_eq(tl_stream_close(loop, &c.s, on_client_close), 0);
        run_to_end(loop);
        cr_assert_str_eq(c.trace, "WSZ", "%s", kFamName[fam]);
        cr_assert_eq(c.shutdown_status, -ECANCELED);
        close(sfd);
        free_loop(loop);
        unbind_socket(lfd, &w);
    }
}

/* After its shutdown the client goes on reading: the server reads EOF,
 * answers, closes, and the client reads the answer then EOF
 * (test-shutdown-eof). */
Test(stream_connect, eof_after_shutdown) {
    for (int fam = 0; fam < FAM_COUNT; ++fam) {
        tl_loop *loop;
        client c;
        where w;
        int lfd, sfd;
        if (!connected_pair(&loop, fam, &c, &w, &lfd, &sfd)) continue;
        cr_assert_eq(tl_stream_read_start(loop, &c.s, on_read), 0);
        client_write(loop, &c, "request");
        cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), 0);
        run_until_trace(loop, &c, 2);
        char got[16] = {0};
        size_t have = 0;
        ssize_t n;
        while ((n = read(sfd, got + have, sizeof got - 1 - have)) > 0) have += (size_t)n;
        cr_assert(n == 0 && strcmp(got, "request") == 0);
        cr_assert_eq(write(sfd, "reply", 5), 5);
        close(sfd);
        run_until_trace(loop, &c, 4);
        cr_assert_str_eq(c.trace, "WSRE", "%s", kFamName[fam]);
        cr_assert(c.got == 5 && memcmp(c.buf, "reply", 5) == 0);
        close_and_finish(loop, &c);
        free_loop(loop);
        unbind_socket(lfd, &w);
    }
}

/* ---- many clients against the loop's own echo server -------------------- */

enum { kMsg = 100 };

typedef struct echo_conn {
    tl_stream s;
    tl_write_req req;
    char buf[kMsg];
    size_t got;
} echo_conn;

static void on_echo_closed(tl_loop *loop, tl_stream *s) {
    (void)loop;
    free(s->data);
}

static void on_echo_shut(tl_loop *loop, tl_stream *s, int status) {
    cr_assert_eq(status, 0, "server shutdown: %s", tl_strerror(status));
    cr_assert_eq(tl_stream_close(loop, s, on_echo_closed), 0);
}

static void on_echo_written(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    (void)req;
    cr_assert_eq(status, 0);
}

/* Collects the whole message, echoes it at EOF, then half-closes. */
static void on_echo_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    echo_conn *e = s->data;
    if (n > 0) {
        cr_assert(e->got + (size_t)n <= kMsg);
        memcpy(e->buf + e->got, buf, (size_t)n);
        e->got += (size_t)n;
        return;
    }
    cr_assert_eq(n, 0, "server read: %s", tl_strerror((int)n));
    struct iovec v = {e->buf, e->got};
    cr_assert_eq(tl_stream_write(loop, s, &e->req, &v, 1, on_echo_written), 0);
    cr_assert_eq(tl_stream_shutdown(loop, s, on_echo_shut), 0);
}

static void on_echo_accept(tl_loop *loop, tl_listener *l, int fd) {
    (void)l;
    cr_assert(fd >= 0, "accept: %s", tl_strerror(fd));
    echo_conn *e = calloc(1, sizeof *e);
    tl_stream_init(&e->s, fd, e);
    cr_assert_eq(tl_stream_read_start(loop, &e->s, on_echo_read), 0);
}

static int clients_done;

static void on_many_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    on_read(loop, s, buf, n);
    if (n <= 0) {
        ++clients_done;
        cr_assert_eq(tl_stream_close(loop, s, on_client_close), 0);
    }
}

static void many_clients(int fam, int count) {
    where w;
    int lfd = bound_socket(fam, &w, 1024);
    if (lfd < 0) return;
    tl_loop *loop = new_loop();
    tl_listener l;
    cr_assert_eq(tl_listener_start(loop, &l, lfd, on_echo_accept, NULL), 0);
    client *c = calloc((size_t)count, sizeof *c);
    char msg[kMsg];
    for (int i = 0; i < kMsg; ++i) msg[i] = (char)('a' + i % 26);
    clients_done = 0;
    for (int i = 0; i < count; ++i) {
        client_init(&c[i], w.family);
        cr_assert_eq(connect_to(loop, &c[i], &w), 0, "client %d: %s", i, kFamName[fam]);
        cr_assert_eq(tl_stream_read_start(loop, &c[i].s, on_many_read), 0);
        c[i].iov[0] = (struct iovec){msg, kMsg};
        cr_assert_eq(tl_stream_write(loop, &c[i].s, &c[i].req[0], c[i].iov, 1, on_write), 0);
        cr_assert_eq(tl_stream_shutdown(loop, &c[i].s, on_shutdown), 0);
    }
    tl_timer failsafe;
    int fired;
    start_failsafe(loop, &failsafe, &fired, 30000);
    while (clients_done < count && !fired) tl_loop_run(loop, TL_RUN_ONCE);
    cr_assert(!fired, "%s: %d of %d clients done", kFamName[fam], clients_done, count);
    tl_listener_stop(loop, &l);
    tl_timer_stop(loop, &failsafe);
    run_to_end(loop);
    for (int i = 0; i < count; ++i) {
        cr_assert_str_eq(c[i].trace, "CWSREZ", "%s client %d: %s", kFamName[fam], i, c[i].trace);
        cr_assert(c[i].got == kMsg && memcmp(c[i].buf, msg, kMsg) == 0);
    }
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.connects, (uint64_t)count);
    cr_assert_eq(st.accepts, (uint64_t)count);
    free(c);
    free_loop(loop);
    unbind_socket(lfd, &w);
}

Test(stream_connect, many_clients_at_once, .timeout = 120) {
    many_clients(FAM_V4, 300);
    many_clients(FAM_V6, 100);
    many_clients(FAM_UNIX, 100);
}

/* ---- references and misuse ------------------------------------------------ */

/* A connecting stream is an active handle: referenced it keeps the loop
 * running until its callback, unreferenced it does not. */
Test(stream_connect, connecting_stream_is_an_active_handle) {
    where w;
    int fillers[2];
    int lfd = full_listener(FAM_V4, &w, fillers);
    tl_loop *loop = new_loop();
    client c;
    client_init(&c, w.family);
    cr_assert_eq(connect_to(loop, &c, &w), 0);
    cr_assert(tl_loop_alive(loop));
    cr_assert_eq(tl_stream_set_ref(loop, &c.s, 0), 0);
    cr_assert(!tl_loop_alive(loop));
    run_to_end(loop); /* returns at once */
    cr_assert_str_eq(c.trace, "");
    cr_assert_eq(tl_loop_free(loop), -EBUSY);
    cr_assert_eq(tl_stream_close(loop, &c.s, on_client_close), 0);
    run_to_end(loop);
    cr_assert_str_eq(c.trace, "CZ");
    free_loop(loop);
    close(fillers[0]);
    close(fillers[1]);
    close(lfd);
}

static void misuse_connect(tl_loop *loop, const where *w) {
    client c;
    client_init(&c, w->family);
    const struct sockaddr *sa = (const struct sockaddr *)&w->ss;
    cr_assert_eq(tl_stream_connect(NULL, &c.s, sa, w->len, on_connect), -EINVAL);
    cr_assert_eq(tl_stream_connect(loop, NULL, sa, w->len, on_connect), -EINVAL);
    cr_assert_eq(tl_stream_connect(loop, &c.s, NULL, w->len, on_connect), -EINVAL);
    cr_assert_eq(tl_stream_connect(loop, &c.s, sa, w->len, NULL), -EINVAL);
    cr_assert_eq(tl_stream_connect(loop, &c.s, sa, 4, on_connect), -EINVAL);
    where v6;
    loopback(FAM_V6, &v6);
    cr_assert_eq(tl_stream_connect(loop, &c.s, (struct sockaddr *)&v6.ss, v6.len, on_connect),
                 -EAFNOSUPPORT);
    cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), -ENOTCONN);
    cr_assert_eq(tl_stream_shutdown(NULL, &c.s, on_shutdown), -EINVAL);
    cr_assert_eq(tl_stream_shutdown(loop, &c.s, NULL), -EINVAL);
    cr_assert_eq(connect_to(loop, &c, w), 0);
    cr_assert_eq(connect_to(loop, &c, w), -EINVAL, "connecting already");
    run_until_trace(loop, &c, 1);
    cr_assert_eq(connect_to(loop, &c, w), -EINVAL, "connected already");
    tl_loop *other = new_loop();
    cr_assert_eq(tl_stream_shutdown(other, &c.s, on_shutdown), -EINVAL);
    free_loop(other);
    cr_assert_eq(tl_stream_close(loop, &c.s, on_client_close), 0);
    cr_assert_eq(connect_to(loop, &c, w), -EPIPE);
    cr_assert_eq(tl_stream_shutdown(loop, &c.s, on_shutdown), -EPIPE);
    run_to_end(loop);
    cr_assert_eq(connect_to(loop, &c, w), -EPIPE, "closed");
}

Test(stream_connect, bad_arguments) {
    where w;
    int lfd = bound_socket(FAM_V4, &w, 8);
    tl_loop *loop = new_loop();
    misuse_connect(loop, &w);
    tl_stream s;
    tl_stream_init(&s, -1, NULL);
    cr_assert_eq(tl_stream_connect(loop, &s, (struct sockaddr *)&w.ss, w.len, on_connect), -EBADF);
    int p[2];
    cr_assert(pipe(p) == 0);
    tl_stream_init(&s, p[0], NULL);
    cr_assert_eq(tl_stream_connect(loop, &s, (struct sockaddr *)&w.ss, w.len, on_connect),
                 -ENOTSOCK);
    close(p[0]);
    close(p[1]);
    /* A stream bound by a read is connected: no connect. */
    int fds[2];
    make_pair(fds);
    tl_stream_init(&s, fds[0], NULL);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    cr_assert_eq(tl_stream_connect(loop, &s, (struct sockaddr *)&w.ss, w.len, on_connect), -EINVAL);
    cr_assert_eq(tl_stream_close(loop, &s, NULL), 0);
    /* The fd held by an I/O watcher. */
    int fd = new_socket(AF_INET);
    tl_io io;
    tl_io_init(&io, fd, on_io_seen, NULL);
    cr_assert_eq(tl_io_start(loop, &io, TL_READ), 0);
    tl_stream s2; /* s is closing: not to be initialised again before its callback */
    tl_stream_init(&s2, fd, NULL);
    cr_assert_eq(tl_stream_connect(loop, &s2, (struct sockaddr *)&w.ss, w.len, on_connect), -EBUSY);
    tl_io_stop(loop, &io);
    close(fd);
    close(fds[1]);
    run_to_end(loop);
    free_loop(loop);
    close(lfd);
}
