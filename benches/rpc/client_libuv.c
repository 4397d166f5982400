/* SPDX-License-Identifier: MIT */
/*
 * The RPC client on libuv, in its idiom: uv_tcp_connect per connection,
 * uv_read_start with an alloc callback, a uv_write_t and a uv_timer_t per
 * in-flight slot (uv_timer_start at the send, uv_timer_stop at the answer).
 * See rpc_common.h for the protocol and the counters.
 *
 *   rpc-client-libuv --port N [--conns N --inflight N --seconds S]
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "rpc_common.h"

typedef struct conn conn;
typedef struct slot {
    uv_timer_t timeout;
    uv_write_t req;
    rpc_frame frame;
    conn *c;
    uint32_t index, seq;
    uint64_t sent_ns, base_ns;
    int waiting, writing, resend;
} slot;

struct conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uint32_t index;
    unsigned char carry[RPC_FRAME];
    size_t carried;
    char buf[16384];
    slot *slots;
};

static struct {
    uv_loop_t *loop;
    rpc_opts o;
    rpc_stats st;
    conn *conns;
    int connected, waiting, draining;
    uint64_t last_send_ns;
    uv_timer_t window, drain;
    uv_prepare_t prep;
    uint64_t wakeups;
} g;

static void on_written(uv_write_t *req, int status);
static void on_timeout(uv_timer_t *t);

static void send_request(slot *sl) {
    if (g.draining) return;
    if (sl->writing) {
        sl->resend = 1;
        return;
    }
    sl->frame.id = rpc_id(sl->c->index, sl->index, ++sl->seq);
    sl->sent_ns = rpc_now_ns();
    sl->base_ns = uv_now(g.loop) * 1000000ull;
    g.last_send_ns = sl->sent_ns;
    sl->waiting = 1;
    ++g.waiting;
    sl->writing = 1;
    uv_timer_start(&sl->timeout, on_timeout, RPC_TIMEOUT_NS / 1000000, 0);
    uv_buf_t b = uv_buf_init((char *)&sl->frame, sizeof sl->frame);
    uv_write(&sl->req, (uv_stream_t *)&sl->c->tcp, &b, 1, on_written);
}

static void on_written(uv_write_t *req, int status) {
    (void)status;
    slot *sl = req->data;
    sl->writing = 0;
    if (sl->resend) {
        sl->resend = 0;
        send_request(sl);
    }
}

static void on_timeout(uv_timer_t *t) {
    slot *sl = t->data;
    rpc_timed_out(&g.st, sl->base_ns, rpc_now_ns());
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
    uv_timer_stop(&sl->timeout);
    sl->waiting = 0;
    --g.waiting;
    rpc_answered(&g.st, sl->sent_ns, rpc_now_ns(), (int)f.late);
    send_request(sl);
}

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf) {
    (void)size;
    conn *c = h->data;
    *buf = uv_buf_init(c->buf, sizeof c->buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    conn *c = s->data;
    if (n < 0) {
        fprintf(stderr, "rpc-client-libuv: connection %u ended: %s\n", c->index,
                uv_strerror((int)n));
        exit(1);
    }
    rpc_frames(c->carry, &c->carried, (const unsigned char *)buf->base, (size_t)n, answer, c);
}

static void on_drain_check(uv_timer_t *t) {
    (void)t;
    if (g.waiting == 0 && rpc_now_ns() - g.last_send_ns > RPC_LATE_NS + 50 * 1000000ull)
        uv_stop(g.loop);
}

static void on_window_end(uv_timer_t *t) {
    (void)t;
    rpc_window_end(&g.st);
    g.draining = 1;
    uv_timer_start(&g.drain, on_drain_check, 50, 50);
}

static void on_connect(uv_connect_t *req, int status) {
    if (status < 0) {
        fprintf(stderr, "rpc-client-libuv: connect: %s\n", uv_strerror(status));
        exit(1);
    }
    conn *c = req->data;
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (++g.connected < g.o.conns) return;
    uv_update_time(g.loop);
    rpc_window_start(&g.st);
    uv_timer_start(&g.window, on_window_end, (uint64_t)(g.o.seconds * 1000), 0);
    for (int i = 0; i < g.o.conns; ++i)
        for (int k = 0; k < g.o.inflight; ++k) send_request(&g.conns[i].slots[k]);
}

static void open_conn(conn *c, uint32_t index, const struct sockaddr_in *addr) {
    c->index = index;
    uv_tcp_init(g.loop, &c->tcp);
    c->tcp.data = c;
    c->connect.data = c;
    c->slots = calloc((size_t)g.o.inflight, sizeof *c->slots);
    for (int k = 0; k < g.o.inflight; ++k) {
        slot *sl = &c->slots[k];
        sl->c = c;
        sl->index = (uint32_t)k;
        sl->req.data = sl;
        uv_timer_init(g.loop, &sl->timeout);
        sl->timeout.data = sl;
    }
    if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)addr, on_connect) < 0)
        exit(1);
}

static void count_wakeup(uv_prepare_t *p) {
    (void)p;
    ++g.wakeups;
}

int main(int argc, char **argv) {
    if (rpc_parse(argc, argv, &g.o) < 0) return 2;
    g.loop = uv_default_loop();
    rpc_stats_init(&g.st);
    struct sockaddr_in addr;
    uv_ip4_addr(g.o.host, g.o.port, &addr);
    uv_timer_init(g.loop, &g.window);
    uv_timer_init(g.loop, &g.drain);
    uv_prepare_init(g.loop, &g.prep);
    uv_prepare_start(&g.prep, count_wakeup);
    uv_unref((uv_handle_t *)&g.prep);
    g.conns = calloc((size_t)g.o.conns, sizeof *g.conns);
    for (int i = 0; i < g.o.conns; ++i) open_conn(&g.conns[i], (uint32_t)i, &addr);
    uv_run(g.loop, UV_RUN_DEFAULT);
    rpc_report(&g.st, "libuv", g.wakeups);
    return 0;
}
