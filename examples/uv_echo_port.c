/* SPDX-License-Identifier: MIT */
/*
 * uv_echo_port.c: a libuv program ported to tickloop, call by call: the TCP
 * echo server with an idle timeout per connection that libuv users write
 * first (uv_tcp_t + uv_listen + uv_read_start + uv_write + uv_timer_t).
 * docs/coming-from.md has the full table; each step below names the libuv
 * call it replaces. What the port shows:
 *
 *  - No bind/listen helpers: the listening socket is made with socket(2),
 *    bind(2), listen(2) and handed to tl_listener_start (uv_listen); the
 *    accept callback receives a connected, non-blocking fd, with no
 *    uv_accept step.
 *  - No alloc_cb: the loop owns the read buffers, and the bytes a read
 *    callback gets are valid only during the call. An echo must copy them
 *    into memory that lives until the write callback, as libuv's echo
 *    server keeps its alloc_cb buffer alive in the write request.
 *  - The idle timeout is restarted per read with tl_timer_start on the
 *    active timer (uv_timer_again / uv_timer_start on an active timer).
 *  - Closing: tl_timer_stop is immediate (the timer may be freed right after
 *    it; libuv needs uv_close and its callback for a timer too), while a
 *    stream closes asynchronously like uv_close: queued writes complete with
 *    -ECANCELED, then the close callback runs, and only there may the
 *    connection be freed. Until then the closing stream keeps
 *    tl_loop_run(TL_RUN_DEFAULT) running. Because a close cancels queued
 *    writes, a client's EOF closes the connection only once its echoes are
 *    written (libuv's uv_shutdown does that wait).
 *  - SIGINT/SIGTERM through tl_signal (uv_signal_t), unreferenced
 *    (uv_unref) so that it alone does not keep the loop alive.
 *
 *   uv_echo_port [--port N] [--idle-ms N] [--io epoll|io_uring|auto] [--timers NAME] [--help]
 *
 * Prints "listening on 127.0.0.1:PORT (io NAME)" on stdout (--port 0, the
 * default, picks a free port). Try: nc 127.0.0.1 PORT, type, and wait
 * --idle-ms (default 5000) without typing: the server closes the
 * connection. tests/uv_echo_port.sh drives it with nc.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "example_options.h"

static uint64_t idle_ns = 5000ull * 1000000;

/* One connection: libuv's uv_tcp_t + uv_timer_t, on a list so that the
 * shutdown can close what is still open (libuv programs walk the handles
 * with uv_walk for that). */
struct conn {
    tl_stream stream;
    tl_timer idle;
    int closing;
    int eof;    /* the client finished sending: close once the echo is out */
    int writes; /* echo writes whose callback has not run */
    struct conn *next, **pprev;
};
static struct conn *conns;

/* One echoed chunk: libuv's write_req_t { uv_write_t req; uv_buf_t buf; }.
 * The bytes follow the header, so one malloc per write, freed in its
 * callback. */
struct echo_write {
    tl_write_req req;
    struct iovec iov;
    char bytes[];
};

static void on_closed(tl_loop *loop, tl_stream *s) {
    (void)loop;
    struct conn *c = s->data;
    if (c->next) c->next->pprev = c->pprev;
    *c->pprev = c->next;
    free(c); /* uv_close's callback: now the memory may go */
}

static void conn_close(tl_loop *loop, struct conn *c) {
    if (c->closing) return;
    c->closing = 1;
    tl_timer_stop(loop, &c->idle);                /* immediate, no callback */
    tl_stream_close(loop, &c->stream, on_closed); /* asynchronous, like uv_close */
}

static void on_idle(tl_loop *loop, tl_timer *t) {
    struct conn *c = t->data;
    printf("closing an idle connection\n");
    fflush(stdout);
    conn_close(loop, c);
}

static void on_written(tl_loop *loop, tl_write_req *req, int status) {
    struct conn *c = req->stream->data;
    (void)status; /* -ECANCELED when the stream closed first: nothing to do */
    free(req->data);
    if (--c->writes == 0 && c->eof) conn_close(loop, c);
}

/* uv_read_start's read_cb, without the alloc_cb: buf is the loop's. */
static void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    struct conn *c = s->data;
    if (n < 0) { /* -errno: the connection is broken */
        conn_close(loop, c);
        return;
    }
    if (n == 0) { /* EOF (UV_EOF): a close now would cancel queued echoes */
        c->eof = 1;
        if (c->writes == 0) conn_close(loop, c);
        return;
    }
    tl_timer_start(loop, &c->idle, idle_ns, 0); /* uv_timer_again */
    struct echo_write *w = malloc(sizeof *w + (size_t)n);
    if (!w) {
        conn_close(loop, c);
        return;
    }
    memcpy(w->bytes, buf, (size_t)n); /* buf is gone when this returns */
    w->req.data = w;
    w->iov.iov_base = w->bytes;
    w->iov.iov_len = (size_t)n;
    int err = tl_stream_write(loop, s, &w->req, &w->iov, 1, on_written); /* uv_write */
    if (err) {
        free(w);
        conn_close(loop, c);
        return;
    }
    c->writes++;
}

/* uv_listen's connection_cb and uv_accept in one: fd is already accepted. */
static void on_accept(tl_loop *loop, tl_listener *l, int fd) {
    (void)l;
    if (fd < 0) return; /* -EMFILE...: the loop pauses accepting by itself */
    struct conn *c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    c->closing = c->eof = c->writes = 0;
    c->next = conns;
    c->pprev = &conns;
    if (conns) conns->pprev = &c->next;
    conns = c;
    tl_stream_init(&c->stream, fd, c);   /* uv_tcp_init + uv_accept */
    tl_timer_init(&c->idle, on_idle, c); /* uv_timer_init */
    tl_timer_start(loop, &c->idle, idle_ns, 0);
    int err = tl_stream_read_start(loop, &c->stream, on_read);
    if (err) {
        fprintf(stderr, "uv_echo_port: tl_stream_read_start: %s\n", tl_strerror(err));
        conn_close(loop, c);
    }
}

static void on_signal(tl_loop *loop, tl_signal *s, int signo) {
    (void)s;
    (void)signo;
    tl_loop_stop(loop); /* uv_stop */
}

static int usage(FILE *f, int status) {
    fprintf(f, "usage: uv_echo_port [--port N] [--idle-ms N] [--io epoll|io_uring|auto] "
               "[--timers NAME] [--help]\n");
    return status;
}

/* Reads the command line into *opts, *port and idle_ns; returns -1 to go
 * on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, tl_loop_options *opts, int *port) {
    static const char *const known[] = {"--port", "--idle-ms", "--io", "--timers"};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(opt, "--help") == 0) return usage(stdout, 0);
        char *end = NULL;
        int ok = val != NULL;
        if (ok && strcmp(opt, "--port") == 0) {
            long v = strtol(val, &end, 10);
            ok = *val && !*end && v >= 0 && v <= 65535;
            *port = (int)v;
        } else if (ok && strcmp(opt, "--idle-ms") == 0) {
            unsigned long long v = strtoull(val, &end, 10);
            ok = *val && *val != '-' && !*end && v > 0 && v <= UINT64_MAX / 1000000;
            idle_ns = v * 1000000;
        } else if (ok && strcmp(opt, "--io") == 0) {
            ok = parse_io_kind(val, &opts->io) == 0;
        } else if (ok && strcmp(opt, "--timers") == 0) {
            opts->timers = val;
        } else {
            ok = 0;
        }
        if (!ok) {
            report_bad_option("uv_echo_port", opt, val, known, sizeof known / sizeof *known);
            return usage(stderr, 2);
        }
        i++;
    }
    return -1;
}

int main(int argc, char **argv) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    int port = 0;
    int status = parse_args(argc, argv, &opts, &port);
    if (status >= 0) return status;

    tl_loop *loop; /* uv_loop_init */
    int err = tl_loop_new(&loop, &opts);
    if (err) {
        fprintf(stderr, "uv_echo_port: tl_loop_new: %s (%s)\n", tl_strerror(err),
                tl_loop_new_error());
        return 1;
    }

    /* uv_tcp_init + uv_ip4_addr + uv_tcp_bind: plain sockets calls. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        fprintf(stderr, "uv_echo_port: cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return 1;
    }
    tl_listener listener; /* uv_listen */
    err = tl_listener_start(loop, &listener, fd, on_accept, NULL);
    if (err) {
        fprintf(stderr, "uv_echo_port: tl_listener_start: %s\n", tl_strerror(err));
        return 1;
    }

    tl_signal sigint, sigterm; /* uv_signal_init + uv_signal_start + uv_unref */
    tl_signal_init(&sigint);
    tl_signal_init(&sigterm);
    if ((err = tl_signal_start(loop, &sigint, SIGINT, on_signal, NULL)) != 0 ||
        (err = tl_signal_start(loop, &sigterm, SIGTERM, on_signal, NULL)) != 0) {
        fprintf(stderr, "uv_echo_port: tl_signal_start: %s\n", tl_strerror(err));
        return 1;
    }
    tl_signal_set_ref(loop, &sigint, 0);
    tl_signal_set_ref(loop, &sigterm, 0);

    printf("listening on 127.0.0.1:%d (io %s)\n", ntohs(addr.sin_port), tl_loop_io_name(loop));
    fflush(stdout);
    err = tl_loop_run(loop, TL_RUN_DEFAULT); /* uv_run(UV_RUN_DEFAULT) */

    /* Stopped by a signal: close what is open, then run the loop until the
       closes have finished (closing streams keep it running), then free it. */
    tl_signal_stop(loop, &sigint);
    tl_signal_stop(loop, &sigterm);
    tl_listener_stop(loop, &listener);
    close(fd);
    for (struct conn *c = conns; c; c = c->next) conn_close(loop, c);
    if (tl_loop_run(loop, TL_RUN_DEFAULT) < 0) err = -1;
    int busy = tl_loop_free(loop);
    printf("stopped\n");
    return err < 0 || busy ? 1 : 0;
}
