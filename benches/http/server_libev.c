/* SPDX-License-Identifier: MIT */
/*
 * server_libev.c: the HTTP throughput benchmark's server on libev (epoll
 * backend), the same request handling as server_tickloop.c (http_core.c).
 *   server-libev [--port N] [--io-batch off|adaptive:US|fixed:US]
 * --io-batch fixed:US sets libev's own I/O collect interval
 * (ev_set_io_collect_interval) to US microseconds; off and adaptive:US keep
 * libev's defaults (what a libev user runs: libev has nothing that follows
 * the load).
 */
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "http_core.h"

struct conn {
    struct hb_conn h;
    ev_io io;
    ev_timer idle;
};

static struct ev_loop *loop;

static void conn_close(struct conn *c) {
    ev_io_stop(loop, &c->io);
    ev_timer_stop(loop, &c->idle);
    close(c->h.fd);
    free(c);
}

static void on_idle(struct ev_loop *l, ev_timer *t, int revents) {
    (void)l;
    (void)revents;
    conn_close(t->data);
}

static void on_conn(struct ev_loop *l, ev_io *w, int revents) {
    struct conn *c = w->data;
    (void)l;
    if ((revents & EV_READ) && hb_want_read(&c->h) && hb_read(&c->h) == HB_CLOSE) {
        conn_close(c);
        return;
    }
    for (;;) {
        int served = hb_process(&c->h);
        if (served > 0) ev_timer_again(loop, &c->idle); /* restart: repeat = 5 s */
        if (hb_flush(&c->h) == HB_CLOSE) {
            conn_close(c);
            return;
        }
        if (served == 0 || hb_want_write(&c->h) || c->h.in_len == 0) break;
    }
    int want = (hb_want_read(&c->h) ? EV_READ : 0) | (hb_want_write(&c->h) ? EV_WRITE : 0);
    if (want == 0) {
        conn_close(c);
    } else if (want != (c->io.events & (EV_READ | EV_WRITE))) {
        ev_io_stop(loop, &c->io);
        ev_io_set(&c->io, c->h.fd, want);
        ev_io_start(loop, &c->io);
    }
}

static void on_accept(struct ev_loop *l, ev_io *w, int revents) {
    (void)l;
    (void)revents;
    for (int i = 0; i < 64; i++) {
        int fd = hb_accept(w->fd);
        if (fd < 0) return;
        struct conn *c = malloc(sizeof *c);
        if (!c) {
            close(fd);
            return;
        }
        hb_conn_init(&c->h, fd);
        ev_io_init(&c->io, on_conn, fd, EV_READ);
        c->io.data = c;
        ev_init(&c->idle, on_idle);
        c->idle.repeat = HB_IDLE_MS / 1000.0;
        c->idle.data = c;
        ev_io_start(loop, &c->io);
        ev_timer_again(loop, &c->idle);
    }
}

int main(int argc, char **argv) {
    struct hb_io_batch batch;
    int port = hb_parse_args_batch(argc, argv, NULL, NULL, &batch);
    loop = ev_loop_new(EVBACKEND_EPOLL);
    if (!loop) {
        fprintf(stderr, "server-libev: ev_loop_new(EVBACKEND_EPOLL) failed\n");
        return 1;
    }
    if (batch.ns && !batch.adaptive) ev_set_io_collect_interval(loop, batch.ns / 1e9);
    fprintf(stderr, "server-libev: io collect interval %llu ns\n",
            (unsigned long long)(batch.adaptive ? 0 : batch.ns));
    ev_io listener;
    ev_io_init(&listener, on_accept, hb_listen(port), EV_READ);
    ev_io_start(loop, &listener);
    ev_run(loop, 0);
    return 1;
}
