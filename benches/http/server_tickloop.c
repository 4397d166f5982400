/* SPDX-License-Identifier: MIT */
/*
 * server_tickloop.c: the HTTP throughput benchmark's server on tickloop.
 *   server-tickloop [--port N] [--io epoll|io_uring] [--io-batch off|adaptive:US|fixed:US]
 * Single-threaded; all request handling is http_core.c's. See run.sh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "http_core.h"
#include "tickloop_new.h"

#define MS ((uint64_t)1000000)

struct conn {
    struct hb_conn h;
    tl_io io;
    tl_timer idle;
};

static tl_loop *loop;

static void conn_close(struct conn *c) {
    tl_io_stop(loop, &c->io);
    tl_timer_stop(loop, &c->idle);
    close(c->h.fd);
    free(c);
}

static void on_idle(tl_loop *l, tl_timer *t) {
    (void)l;
    conn_close(t->data);
}

static void on_conn(tl_loop *l, tl_io *w, unsigned revents) {
    struct conn *c = w->data;
    (void)l;
    if ((revents & (TL_READ | TL_ERROR | TL_HUP)) && hb_want_read(&c->h) &&
        hb_read(&c->h) == HB_CLOSE) {
        conn_close(c);
        return;
    }
    for (;;) {
        int served = hb_process(&c->h);
        if (served > 0) tl_timer_start(loop, &c->idle, HB_IDLE_MS * MS, 0);
        if (hb_flush(&c->h) == HB_CLOSE) {
            conn_close(c);
            return;
        }
        if (served == 0 || hb_want_write(&c->h) || c->h.in_len == 0) break;
    }
    unsigned want = (hb_want_read(&c->h) ? TL_READ : 0) | (hb_want_write(&c->h) ? TL_WRITE : 0);
    if (want == 0) {
        conn_close(c); /* EOF with a partial request */
    } else if (want != c->io.events && tl_io_start(loop, &c->io, want) < 0) {
        conn_close(c);
    }
}

static void on_accept(tl_loop *l, tl_io *w, unsigned revents) {
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
        tl_io_init(&c->io, fd, on_conn, c);
        tl_timer_init(&c->idle, on_idle, c);
        if (tl_io_start(loop, &c->io, TL_READ) < 0 ||
            tl_timer_start(loop, &c->idle, HB_IDLE_MS * MS, 0) < 0)
            conn_close(c);
    }
}

int main(int argc, char **argv) {
    const char *io = "epoll";
    struct hb_io_batch batch;
    int port = hb_parse_args_batch(argc, argv, "--io", &io, &batch);
    loop = hb_tickloop_new("server-tickloop", io, 0, &batch);
    tl_io listener;
    tl_io_init(&listener, hb_listen(port), on_accept, NULL);
    int r = tl_io_start(loop, &listener, TL_READ);
    if (r < 0) {
        fprintf(stderr, "server-tickloop: tl_io_start: %s\n", tl_strerror(r));
        return 1;
    }
    r = tl_loop_run(loop, TL_RUN_DEFAULT); /* until killed */
    fprintf(stderr, "server-tickloop: tl_loop_run: %s\n", tl_strerror(r));
    return 1;
}
