/* SPDX-License-Identifier: MIT */
/*
 * server_libuv.c: the heartbeating-connections server on libuv: a uv_tcp_t
 * and a uv_timer_t per connection, uv_read_start with one static buffer
 * (libuv's way of keeping idle connections cheap), the timer restarted with
 * uv_timer_start on every read.
 *   conn-server-libuv [--port N] [--timeout-ms N] [--scale X]
 */
#define _GNU_SOURCE /* uv.h needs pthread_rwlock_t */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "conn_common.h"

struct conn {
    uv_tcp_t tcp;
    uv_timer_t idle;
    uint8_t off;     /* heartbeat bytes received, modulo 8 */
    uint8_t closing; /* handles still to close */
};

static uv_loop_t *loop;
static char rbuf[65536];
static uint64_t timeout_ms;

static void on_closed(uv_handle_t *h) {
    struct conn *c = h->data;
    if (--c->closing == 0) free(c);
}

static void conn_close(struct conn *c) {
    if (c->closing) return;
    c->closing = 2;
    cb_stats.open--;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    uv_close((uv_handle_t *)&c->idle, on_closed);
}

static void on_idle(uv_timer_t *t) {
    /* t->timeout is the deadline on the loop's millisecond clock, which
     * libuv takes from CLOCK_MONOTONIC (the coarse one where that has
     * millisecond resolution). */
    cb_account_idle(t->timeout * CB_MS);
    conn_close(t->data);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(rbuf, sizeof rbuf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    struct conn *c = s->data;
    if (n > 0) {
        uv_timer_start(&c->idle, on_idle, timeout_ms, 0);
        cb_account_read(&c->off, buf->base, (size_t)n);
    } else if (n == UV_EOF) {
        cb_stats.peer_closed++;
        conn_close(c);
    } else if (n < 0) {
        cb_stats.errors++;
        conn_close(c);
    }
}

static void on_connection(uv_stream_t *server, int status) {
    if (status < 0) {
        cb_stats.accept_errors++;
        return;
    }
    struct conn *c = malloc(sizeof *c);
    if (!c) {
        cb_stats.accept_errors++;
        return;
    }
    c->off = 0;
    c->closing = 0;
    uv_tcp_init(loop, &c->tcp);
    uv_timer_init(loop, &c->idle);
    c->tcp.data = c->idle.data = c;
    cb_stats.open++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        cb_stats.accept_errors++;
        conn_close(c);
        return;
    }
    cb_stats.accepted++;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    uv_timer_start(&c->idle, on_idle, timeout_ms, 0);
}

static void on_signal(uv_signal_t *s, int signo) {
    char extra[32];
    snprintf(extra, sizeof extra, "conn_bytes=%zu", sizeof(struct conn));
    cb_print_stats("libuv", extra);
    if (signo == SIGTERM) uv_stop(s->loop);
}

int main(int argc, char **argv) {
    cb_parse_args(argc, argv, 0);
    /* libuv's timers have millisecond resolution. */
    timeout_ms = (cb_config.timeout_ns + CB_MS - 1) / CB_MS;
    loop = uv_default_loop();
    static uv_signal_t usr1, term;
    uv_signal_init(loop, &usr1);
    uv_signal_init(loop, &term);
    uv_signal_start(&usr1, on_signal, SIGUSR1);
    uv_signal_start(&term, on_signal, SIGTERM);
    static uv_tcp_t server;
    uv_tcp_init(loop, &server);
    int r = uv_tcp_open(&server, cb_listen(cb_config.port));
    if (r == 0) r = uv_listen((uv_stream_t *)&server, 65535, on_connection);
    if (r < 0) {
        fprintf(stderr, "conn-server-libuv: %s\n", uv_strerror(r));
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    return 0;
}
