/* SPDX-License-Identifier: MIT */
/*
 * The RPC client on libev, in its idiom: non-blocking sockets connected by
 * hand, an ev_io per connection for reads (and for writes while the socket
 * is full), send() straight from the callback that makes a request, an
 * ev_timer per in-flight slot started at the send and stopped at the answer.
 * See rpc_common.h for the protocol and the counters.
 *
 *   rpc-client-libev --port N [--conns N --inflight N --seconds S]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc_common.h"

typedef struct conn conn;
typedef struct slot {
    ev_timer timeout;
    rpc_frame frame;
    conn *c;
    uint32_t index, seq;
    uint64_t sent_ns, base_ns;
    int waiting;
} slot;

struct conn {
    ev_io rio, wio;
    int fd;
    uint32_t index;
    unsigned char carry[RPC_FRAME];
    size_t carried;
    unsigned char out[RPC_FRAME * RPC_MAX_INFLIGHT * 2]; /* what send() did not take */
    size_t out_len;
    slot *slots;
};

static struct {
    struct ev_loop *loop;
    rpc_opts o;
    rpc_stats st;
    conn *conns;
    int waiting, draining;
    uint64_t last_send_ns;
    ev_timer window, drain;
    uint64_t wakeups;
} g;

static void flush_out(conn *c) {
    while (c->out_len) {
        ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) exit(1);
            break;
        }
        memmove(c->out, c->out + n, c->out_len - (size_t)n);
        c->out_len -= (size_t)n;
    }
    if (c->out_len)
        ev_io_start(g.loop, &c->wio);
    else
        ev_io_stop(g.loop, &c->wio);
}

/* The monotonic time at which this iteration's ev_now was taken: the
   start of the timers started now. ev_now is wall-clock seconds; its
   distance to ev_time(), read once per iteration, carries it over. */
static uint64_t loop_base_ns(void) {
    static ev_tstamp seen = -1;
    static uint64_t base;
    if (ev_now(g.loop) != seen) {
        seen = ev_now(g.loop);
        base = rpc_now_ns() - (uint64_t)((ev_time() - seen) * 1e9);
    }
    return base;
}

static void send_request(slot *sl) {
    if (g.draining) return;
    conn *c = sl->c;
    sl->frame.id = rpc_id(c->index, sl->index, ++sl->seq);
    sl->sent_ns = rpc_now_ns();
    sl->base_ns = loop_base_ns();
    g.last_send_ns = sl->sent_ns;
    sl->waiting = 1;
    ++g.waiting;
    ev_timer_set(&sl->timeout, RPC_TIMEOUT_NS / 1e9, 0.);
    ev_timer_start(g.loop, &sl->timeout);
    if (c->out_len == 0) {
        ssize_t n = send(c->fd, &sl->frame, sizeof sl->frame, MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof sl->frame) return;
        if (n < 0) n = 0;
        memcpy(c->out, (char *)&sl->frame + n, sizeof sl->frame - (size_t)n);
        c->out_len = sizeof sl->frame - (size_t)n;
    } else {
        memcpy(c->out + c->out_len, &sl->frame, sizeof sl->frame);
        c->out_len += sizeof sl->frame;
    }
    flush_out(c);
}

static void on_timeout(struct ev_loop *loop, ev_timer *t, int revents) {
    (void)loop;
    (void)revents;
    slot *sl = t->data;
    /* ev_now is a double of seconds: the early check allows 1 us for its
       rounding and for the two clock reads */
    rpc_timed_out(&g.st, sl->base_ns - 1000, rpc_now_ns());
    sl->waiting = 0;
    --g.waiting;
    send_request(sl);
}

static void answer(void *ctx, const unsigned char *b) {
    conn *c = ctx;
    rpc_frame f;
    memcpy(&f, b, sizeof f);
    slot *sl = &c->slots[rpc_id_slot(f.id) % (uint32_t)g.o.inflight];
    if (!sl->waiting || sl->frame.id != f.id) {
        rpc_stale(&g.st, (int)f.late);
        return;
    }
    ev_timer_stop(g.loop, &sl->timeout);
    sl->waiting = 0;
    --g.waiting;
    rpc_answered(&g.st, sl->sent_ns, rpc_now_ns(), (int)f.late);
    send_request(sl);
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents) {
    (void)loop;
    (void)revents;
    conn *c = w->data;
    unsigned char buf[16384];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) {
            fprintf(stderr, "rpc-client-libev: connection %u ended\n", c->index);
            exit(1);
        }
        rpc_frames(c->carry, &c->carried, buf, (size_t)n, answer, c);
        if ((size_t)n < sizeof buf) return;
    }
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents) {
    (void)loop;
    (void)revents;
    flush_out(w->data);
}

static void on_drain_check(struct ev_loop *loop, ev_timer *t, int revents) {
    (void)t;
    (void)revents;
    if (g.waiting == 0 && rpc_now_ns() - g.last_send_ns > RPC_LATE_NS + 50 * 1000000ull)
        ev_break(loop, EVBREAK_ALL);
}

static void on_window_end(struct ev_loop *loop, ev_timer *t, int revents) {
    (void)t;
    (void)revents;
    rpc_window_end(&g.st);
    g.draining = 1;
    ev_timer_init(&g.drain, on_drain_check, 0.05, 0.05);
    ev_timer_start(loop, &g.drain);
}

/* Connects every socket (blocking connects to loopback: before the window). */
static void open_conn(conn *c, uint32_t index, const struct sockaddr_in *addr) {
    c->index = index;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(c->fd, (const struct sockaddr *)addr, sizeof *addr) < 0) {
        perror("rpc-client-libev: connect");
        exit(1);
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    ev_io_init(&c->rio, on_readable, c->fd, EV_READ);
    ev_io_init(&c->wio, on_writable, c->fd, EV_WRITE);
    c->rio.data = c->wio.data = c;
    ev_io_start(g.loop, &c->rio);
    c->slots = calloc((size_t)g.o.inflight, sizeof *c->slots);
    for (int k = 0; k < g.o.inflight; ++k) {
        slot *sl = &c->slots[k];
        sl->c = c;
        sl->index = (uint32_t)k;
        ev_timer_init(&sl->timeout, on_timeout, 0.1, 0.);
        sl->timeout.data = sl;
    }
}

static void count_wakeup(struct ev_loop *loop, ev_prepare *w, int revents) {
    (void)loop;
    (void)w;
    (void)revents;
    ++g.wakeups;
}

int main(int argc, char **argv) {
    if (rpc_parse(argc, argv, &g.o) < 0) return 2;
    g.loop = ev_loop_new(EVBACKEND_EPOLL);
    rpc_stats_init(&g.st);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.o.port)};
    inet_pton(AF_INET, g.o.host, &addr.sin_addr);
    g.conns = calloc((size_t)g.o.conns, sizeof *g.conns);
    for (int i = 0; i < g.o.conns; ++i) open_conn(&g.conns[i], (uint32_t)i, &addr);
    ev_prepare prep;
    ev_prepare_init(&prep, count_wakeup);
    ev_prepare_start(g.loop, &prep);
    ev_unref(g.loop);
    ev_now_update(g.loop);
    rpc_window_start(&g.st);
    ev_timer_init(&g.window, on_window_end, g.o.seconds, 0.);
    ev_timer_start(g.loop, &g.window);
    for (int i = 0; i < g.o.conns; ++i)
        for (int k = 0; k < g.o.inflight; ++k) send_request(&g.conns[i].slots[k]);
    ev_run(g.loop, 0);
    rpc_report(&g.st, "libev", g.wakeups);
    return 0;
}
