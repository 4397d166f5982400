/* SPDX-License-Identifier: MIT */
/*
 * server_libev.c: the heartbeating-connections server on libev (epoll
 * backend): an ev_io and an ev_timer per connection, the timer restarted
 * with ev_timer_again (libev's idiom for idle timeouts), reads with recv()
 * into one static buffer.
 *   conn-server-libev [--port N] [--timeout-ms N] [--scale X]
 *                     [--io-batch off|adaptive:US|fixed:US]
 * --io-batch fixed:US sets libev's own I/O collect interval
 * (ev_set_io_collect_interval) to US microseconds; off and adaptive:US keep
 * libev's defaults (no collect interval: what a libev user runs), as
 * libev has nothing that follows the load.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_common.h"

struct conn {
    ev_io io;
    ev_timer idle;
    uint8_t off; /* heartbeat bytes received, modulo 8 */
};

static struct ev_loop *loop;
static char rbuf[65536];
static uint64_t io_collect_ns; /* ev_set_io_collect_interval's, 0: none */

static void conn_close(struct conn *c) {
    ev_io_stop(loop, &c->io);
    ev_timer_stop(loop, &c->idle);
    close(c->io.fd);
    free(c);
    cb_stats.open--;
}

static void on_idle(struct ev_loop *l, ev_timer *t, int revents) {
    (void)l;
    (void)revents;
    /* A repeating timer is re-armed (at += repeat) before its callback, so
     * the deadline that expired is at - repeat, on libev's monotonic clock. */
    cb_account_idle((uint64_t)((t->at - t->repeat) * 1e9));
    conn_close(t->data);
}

static void on_read(struct ev_loop *l, ev_io *w, int revents) {
    struct conn *c = w->data;
    (void)l;
    (void)revents;
    ssize_t n = recv(w->fd, rbuf, sizeof rbuf, 0);
    if (n > 0) {
        ev_timer_again(loop, &c->idle);
        cb_account_read(&c->off, rbuf, (size_t)n);
    } else if (n == 0) {
        cb_stats.peer_closed++;
        conn_close(c);
    } else if (errno != EAGAIN && errno != EINTR) {
        cb_stats.errors++;
        conn_close(c);
    }
}

static void on_accept(struct ev_loop *l, ev_io *w, int revents) {
    (void)l;
    (void)revents;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR) cb_stats.accept_errors++;
            return;
        }
        struct conn *c = malloc(sizeof *c);
        if (!c) {
            close(fd);
            cb_stats.accept_errors++;
            continue;
        }
        c->off = 0;
        ev_io_init(&c->io, on_read, fd, EV_READ);
        c->io.data = c;
        ev_init(&c->idle, on_idle);
        c->idle.repeat = cb_config.timeout_ns / 1e9;
        c->idle.data = c;
        ev_io_start(loop, &c->io);
        ev_timer_again(loop, &c->idle);
        cb_stats.accepted++;
        cb_stats.open++;
    }
}

static void on_signal(struct ev_loop *l, ev_signal *w, int revents) {
    (void)revents;
    char extra[128];
    snprintf(extra, sizeof extra, "conn_bytes=%zu iterations=%u io_collect_ns=%llu",
             sizeof(struct conn), ev_iteration(loop), (unsigned long long)io_collect_ns);
    cb_print_stats("libev", extra);
    if (w->signum == SIGTERM) ev_break(l, EVBREAK_ALL);
}

int main(int argc, char **argv) {
    cb_parse_args(argc, argv, CB_OPT_BATCH);
    loop = ev_loop_new(EVBACKEND_EPOLL);
    if (!loop) {
        fprintf(stderr, "conn-server-libev: ev_loop_new(EVBACKEND_EPOLL) failed\n");
        return 1;
    }
    /* libev's way of gathering events per wake-up: each wait sleeps until
       the interval has passed since the last one. Only for fixed:US; with
       adaptive:US libev keeps its defaults. */
    if (cb_config.io_batch_ns && !cb_config.io_batch_adaptive) {
        io_collect_ns = cb_config.io_batch_ns;
        ev_set_io_collect_interval(loop, io_collect_ns / 1e9);
    }
    ev_signal usr1, term;
    ev_signal_init(&usr1, on_signal, SIGUSR1);
    ev_signal_init(&term, on_signal, SIGTERM);
    ev_signal_start(loop, &usr1);
    ev_signal_start(loop, &term);
    ev_io listener;
    ev_io_init(&listener, on_accept, cb_listen(cb_config.port), EV_READ);
    ev_io_start(loop, &listener);
    ev_run(loop, 0);
    return 0;
}
