/* SPDX-License-Identifier: MIT */
/*
 * server_libuv.c: the HTTP throughput benchmark's server on libuv, the same
 * request handling as server_tickloop.c (http_core.c), in two modes:
 *   server-libuv [--port N] [--mode poll|stream]
 * poll:   uv_poll_t readiness on the socket, read()/send() as the others do;
 * stream: uv_tcp_t with uv_read_start / uv_try_write (libuv's native way,
 *         uv_write only when the socket is full).
 */
#define _GNU_SOURCE /* uv.h needs pthread_rwlock_t */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "http_core.h"

static uv_loop_t *loop;
static int stream_mode;

struct conn {
    struct hb_conn h;
    union {
        uv_poll_t poll;
        uv_tcp_t tcp;
    } u;
    uv_timer_t idle;
    uv_write_t wreq;
    int writing; /* a uv_write is in flight (stream mode) */
    int closing;
    int handles_open;
};

static void on_handle_closed(uv_handle_t *h) {
    struct conn *c = h->data;
    if (--c->handles_open == 0) {
        if (!stream_mode) close(c->h.fd);
        free(c);
    }
}

static void conn_close(struct conn *c) {
    if (c->closing) return;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->u, on_handle_closed);
    uv_close((uv_handle_t *)&c->idle, on_handle_closed);
}

static void on_idle(uv_timer_t *t) {
    conn_close(t->data);
}

static void restart_idle(struct conn *c) {
    uv_timer_start(&c->idle, on_idle, HB_IDLE_MS, 0);
}

/* ---- poll mode ---------------------------------------------------------- */

static void on_poll(uv_poll_t *p, int status, int events) {
    struct conn *c = p->data;
    if (status < 0) events |= UV_READABLE; /* let read() report the error */
    if ((events & (UV_READABLE | UV_DISCONNECT)) && hb_want_read(&c->h) &&
        hb_read(&c->h) == HB_CLOSE) {
        conn_close(c);
        return;
    }
    for (;;) {
        int served = hb_process(&c->h);
        if (served > 0) restart_idle(c);
        if (hb_flush(&c->h) == HB_CLOSE) {
            conn_close(c);
            return;
        }
        if (served == 0 || hb_want_write(&c->h) || c->h.in_len == 0) break;
    }
    int want = (hb_want_read(&c->h) ? UV_READABLE : 0) | (hb_want_write(&c->h) ? UV_WRITABLE : 0);
    if (want == 0)
        conn_close(c);
    else
        uv_poll_start(&c->u.poll, want, on_poll); /* cheap when unchanged */
}

/* ---- stream mode -------------------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    struct conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->h.in + c->h.in_len, (unsigned)(HB_IN_CAP - c->h.in_len));
}

static void stream_write(struct conn *c);

static void on_written(uv_write_t *req, int status) {
    struct conn *c = req->data;
    c->writing = 0;
    c->h.out_off = c->h.out_len;
    if (status < 0 || c->h.close_after) {
        conn_close(c);
        return;
    }
    c->h.out_off = c->h.out_len = 0;
    /* Requests read while the write was in flight. */
    if (hb_process(&c->h) > 0) restart_idle(c);
    stream_write(c);
}

/* Writes out what is pending: uv_try_write first, uv_write for the rest. */
static void stream_write(struct conn *c) {
    if (c->closing || c->writing || c->h.out_off == c->h.out_len) return;
    uv_buf_t buf = uv_buf_init(c->h.out + c->h.out_off, (unsigned)(c->h.out_len - c->h.out_off));
    int n = uv_try_write((uv_stream_t *)&c->u.tcp, &buf, 1);
    if (n > 0) c->h.out_off += (size_t)n;
    if (n < 0 && n != UV_EAGAIN) {
        conn_close(c);
        return;
    }
    if (c->h.out_off == c->h.out_len) {
        c->h.out_off = c->h.out_len = 0;
        if (c->h.close_after) conn_close(c);
        return;
    }
    buf = uv_buf_init(c->h.out + c->h.out_off, (unsigned)(c->h.out_len - c->h.out_off));
    c->wreq.data = c;
    c->writing = 1;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->u.tcp, &buf, 1, on_written) < 0) conn_close(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    struct conn *c = s->data;
    (void)buf;
    if (nread < 0) {
        conn_close(c); /* EOF or error: the client is gone */
        return;
    }
    c->h.in_len += (size_t)nread;
    if (c->writing) return; /* answered when the write completes */
    if (hb_process(&c->h) > 0) restart_idle(c);
    stream_write(c);
    if (!c->closing && c->h.in_len == HB_IN_CAP) conn_close(c); /* a header too large */
}

/* ---- accepting ---------------------------------------------------------- */

static void on_accept_poll(uv_poll_t *p, int status, int events) {
    (void)status;
    (void)events;
    int listen_fd;
    uv_fileno((uv_handle_t *)p, &listen_fd);
    for (int i = 0; i < 64; i++) {
        int fd = hb_accept(listen_fd);
        if (fd < 0) return;
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            return;
        }
        hb_conn_init(&c->h, fd);
        c->handles_open = 2;
        uv_poll_init(loop, &c->u.poll, fd);
        c->u.poll.data = c;
        uv_timer_init(loop, &c->idle);
        c->idle.data = c;
        uv_poll_start(&c->u.poll, UV_READABLE, on_poll);
        restart_idle(c);
    }
}

static void on_connection(uv_stream_t *server, int status) {
    if (status < 0) return;
    struct conn *c = calloc(1, sizeof *c);
    if (!c) return;
    uv_tcp_init(loop, &c->u.tcp);
    c->u.tcp.data = c;
    uv_timer_init(loop, &c->idle);
    c->idle.data = c;
    c->handles_open = 2;
    if (uv_accept(server, (uv_stream_t *)&c->u.tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->u.tcp, 1);
    uv_os_fd_t fd;
    uv_fileno((uv_handle_t *)&c->u.tcp, &fd);
    hb_conn_init(&c->h, fd);
    uv_read_start((uv_stream_t *)&c->u.tcp, on_alloc, on_read);
    restart_idle(c);
}

int main(int argc, char **argv) {
    const char *mode = "poll";
    int port = hb_parse_args(argc, argv, "--mode", &mode);
    if (strcmp(mode, "stream") == 0) {
        stream_mode = 1;
    } else if (strcmp(mode, "poll") != 0) {
        fprintf(stderr, "server-libuv: --mode must be poll or stream, not '%s'\n", mode);
        return 2;
    }
    loop = uv_default_loop();
    int listen_fd = hb_listen(port);
    if (stream_mode) {
        static uv_tcp_t server;
        uv_tcp_init(loop, &server);
        int r = uv_tcp_open(&server, listen_fd);
        if (r == 0) r = uv_listen((uv_stream_t *)&server, 4096, on_connection);
        if (r < 0) {
            fprintf(stderr, "server-libuv: %s\n", uv_strerror(r));
            return 1;
        }
    } else {
        static uv_poll_t server;
        uv_poll_init(loop, &server, listen_fd);
        uv_poll_start(&server, UV_READABLE, on_accept_poll);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    return 1;
}
