/* SPDX-License-Identifier: MIT */
/*
 * server_tickloop.c: the heartbeating-connections server on tickloop's
 * streams and listeners: the loop accepts and reads (on io_uring a
 * multishot accept and one multishot receive per connection into the
 * loop's shared buffer ring; on epoll readiness and recv() into the loop's
 * one buffer), the caller keeps a tl_stream and a tl_timer per connection
 * and no buffer of its own.
 *   conn-server-tickloop [--port N] [--timeout-ms N] [--scale X]
 *                        [--leeway-ms N] [--io epoll|io_uring] [--timers NAME]
 *                        [--io-batch off|adaptive:US|fixed:US]
 * --io-batch sets tl_loop_options.io_batch_ns (US microseconds) and, for
 * adaptive, io_batch_adaptive; off (the default) leaves both 0, so that
 * TICKLOOP_IO_BATCH may still set them.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "conn_common.h"

struct conn {
    tl_stream s;
    tl_timer idle;
    uint8_t off; /* heartbeat bytes received, modulo 8 */
};

static tl_loop *loop;
static tl_listener listener;
static tl_signal usr1, term;

static void on_closed(tl_loop *l, tl_stream *s) {
    (void)l;
    free(s->data);
}

static void conn_close(struct conn *c) {
    tl_timer_stop(loop, &c->idle);
    tl_stream_close(loop, &c->s, on_closed);
    cb_stats.open--;
}

static void on_idle(tl_loop *l, tl_timer *t) {
    (void)l;
    cb_account_idle(t->deadline); /* a one-shot timer keeps its deadline in its callback */
    conn_close(t->data);
}

static void on_read(tl_loop *l, tl_stream *s, const void *buf, ptrdiff_t n) {
    struct conn *c = s->data;
    if (n > 0) {
        tl_timer_start(l, &c->idle, cb_config.timeout_ns, 0); /* the heartbeat's restart */
        cb_account_read(&c->off, buf, (size_t)n);
        return;
    }
    if (n == 0)
        cb_stats.peer_closed++;
    else
        cb_stats.errors++;
    conn_close(c);
}

static void on_accept(tl_loop *l, tl_listener *lst, int fd) {
    (void)lst;
    if (fd < 0) { /* the loop pauses accepting by itself */
        cb_stats.accept_errors++;
        return;
    }
    struct conn *c = malloc(sizeof *c);
    if (!c) {
        cb_stats.accept_errors++;
        close(fd);
        return;
    }
    c->off = 0;
    tl_stream_init(&c->s, fd, c);
    tl_timer_init(&c->idle, on_idle, c);
    if (cb_config.leeway_ns) tl_timer_set_leeway(&c->idle, cb_config.leeway_ns);
    cb_stats.open++;
    int r = tl_stream_read_start(l, &c->s, on_read);
    if (r == 0) r = tl_timer_start(l, &c->idle, cb_config.timeout_ns, 0);
    if (r < 0) {
        fprintf(stderr, "conn-server-tickloop: connection setup: %s\n", tl_strerror(r));
        cb_stats.accept_errors++;
        conn_close(c);
        return;
    }
    cb_stats.accepted++;
}

static void on_signal(tl_loop *l, tl_signal *s, int signo) {
    (void)s;
    tl_loop_stats st;
    tl_loop_stats_get(l, &st);
    tl_lateness lat;
    tl_loop_lateness(l, &lat, 0);
    char extra[512];
    snprintf(extra, sizeof extra,
             "conn_bytes=%zu io=%s path=%s timers=%s loop_late_max_us=%.1f "
             "buffer_ring_exhausted=%llu iterations=%llu io_batch_ns=%llu io_batch_adaptive=%u "
             "io_batched_waits=%llu",
             sizeof(struct conn), tl_loop_io_name(l), tl_loop_stream_path(l),
             tl_loop_timers_name(l), lat.max_ns / 1e3, (unsigned long long)st.buffer_ring_exhausted,
             (unsigned long long)st.iterations, (unsigned long long)st.io_batch_ns,
             (unsigned)cb_config.io_batch_adaptive, (unsigned long long)st.io_batched_waits);
    cb_print_stats("tickloop", extra);
    if (signo == SIGTERM) tl_loop_stop(l);
}

int main(int argc, char **argv) {
    cb_parse_args(argc, argv, CB_OPT_LOOP | CB_OPT_BATCH);
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    if (strcmp(cb_config.io, "epoll") == 0) {
        opts.io = TL_IO_EPOLL;
    } else if (strcmp(cb_config.io, "io_uring") == 0) {
        opts.io = TL_IO_URING;
    } else {
        fprintf(stderr, "conn-server-tickloop: --io must be epoll or io_uring\n");
        return 2;
    }
    opts.timers = cb_config.timers;
    opts.io_batch_ns = cb_config.io_batch_ns;
    opts.io_batch_adaptive = cb_config.io_batch_adaptive;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        const char *why = tl_loop_new_error();
        fprintf(stderr, "conn-server-tickloop: tl_loop_new: %s%s%s\n", tl_strerror(r),
                why ? ": " : "", why ? why : "");
        return 1;
    }
    /* tl_signal_start blocks the signals; the listener comes after, so
     * run.py's first SIGUSR1 (once "listening on" is printed) finds them. */
    if ((r = tl_signal_start(loop, &usr1, SIGUSR1, on_signal, NULL)) < 0 ||
        (r = tl_signal_start(loop, &term, SIGTERM, on_signal, NULL)) < 0 ||
        (r = tl_listener_start(loop, &listener, cb_listen(cb_config.port), on_accept, NULL)) < 0) {
        fprintf(stderr, "conn-server-tickloop: setup: %s\n", tl_strerror(r));
        return 1;
    }
    r = tl_loop_run(loop, TL_RUN_DEFAULT);
    if (r < 0) {
        fprintf(stderr, "conn-server-tickloop: tl_loop_run: %s\n", tl_strerror(r));
        return 1;
    }
    return 0;
}
