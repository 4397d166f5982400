/* SPDX-License-Identifier: MIT */
/*
 * The RPC client on tickloop, in its idiom: a stream per connection that
 * the loop connects (tl_stream_connect), a timer and a write request per
 * in-flight slot embedded in the connection, tl_timer_stop on each answer
 * (Dubbo's DefaultFuture: one start and one cancel per request, nearly
 * none firing). See rpc_common.h for the protocol and the counters.
 *
 *   rpc-client-tickloop --port N [--conns N --inflight N --seconds S]
 *                       [--io epoll|io_uring] [--timers heap4|wheel|...]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <tickloop/tickloop.h>

#include "rpc_common.h"

typedef struct conn conn;
typedef struct slot {
    tl_timer timeout;
    tl_write_req req;
    rpc_frame frame;
    struct iovec iov;
    conn *c;
    uint32_t index, seq;
    uint64_t sent_ns; /* the clock at the send, for the RTT          */
    uint64_t base_ns; /* tl_now at the send: the timeout's start      */
    int waiting;      /* a request is out, neither answered nor timed out */
    int writing;      /* req is queued (its callback has not run) */
    int resend;       /* send again once the write callback has run */
} slot;

struct conn {
    tl_stream s;
    uint32_t index;
    unsigned char carry[RPC_FRAME];
    size_t carried;
    slot *slots;
};

static struct {
    tl_loop *loop;
    rpc_opts o;
    rpc_stats st;
    conn *conns;
    int connected, waiting, draining;
    uint64_t last_send_ns;
    tl_timer window, drain;
} g;

static void on_written(tl_loop *loop, tl_write_req *req, int status);

static void send_request(slot *sl) {
    if (g.draining) return;
    if (sl->writing) {
        sl->resend = 1;
        return;
    }
    sl->frame.id = rpc_id(sl->c->index, sl->index, ++sl->seq);
    sl->sent_ns = rpc_now_ns();
    sl->base_ns = tl_now(g.loop);
    g.last_send_ns = sl->base_ns;
    sl->waiting = 1;
    ++g.waiting;
    sl->writing = 1;
    tl_timer_start(g.loop, &sl->timeout, RPC_TIMEOUT_NS, 0);
    tl_stream_write(g.loop, &sl->c->s, &sl->req, &sl->iov, 1, on_written);
}

static void on_written(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    (void)status;
    slot *sl = req->data;
    sl->writing = 0;
    if (sl->resend) {
        sl->resend = 0;
        send_request(sl);
    }
}

static void on_timeout(tl_loop *loop, tl_timer *t) {
    slot *sl = t->data;
    rpc_timed_out(&g.st, sl->base_ns, rpc_now_ns());
    (void)loop;
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
    tl_timer_stop(g.loop, &sl->timeout);
    sl->waiting = 0;
    --g.waiting;
    rpc_answered(&g.st, sl->sent_ns, rpc_now_ns(), (int)f.late);
    send_request(sl);
}

static void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    (void)loop;
    conn *c = s->data;
    if (n <= 0) {
        fprintf(stderr, "rpc-client-tickloop: connection %u ended: %s\n", c->index,
                n ? tl_strerror((int)n) : "EOF");
        exit(1);
    }
    rpc_frames(c->carry, &c->carried, buf, (size_t)n, answer, c);
}

static void on_drain_check(tl_loop *loop, tl_timer *t) {
    (void)t;
    if (g.waiting == 0 && tl_now(loop) - g.last_send_ns > RPC_LATE_NS + 50 * 1000000ull)
        tl_loop_stop(loop);
}

static void on_window_end(tl_loop *loop, tl_timer *t) {
    (void)t;
    rpc_window_end(&g.st);
    g.draining = 1;
    tl_timer_start(loop, &g.drain, 50 * 1000000ull, 50 * 1000000ull);
}

static void on_connect(tl_loop *loop, tl_stream *s, int status) {
    if (status < 0) {
        fprintf(stderr, "rpc-client-tickloop: connect: %s\n", tl_strerror(status));
        exit(1);
    }
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (++g.connected < g.o.conns) return;
    rpc_window_start(&g.st);
    tl_timer_start(loop, &g.window, (uint64_t)(g.o.seconds * 1e9), 0);
    for (int i = 0; i < g.o.conns; ++i)
        for (int k = 0; k < g.o.inflight; ++k) send_request(&g.conns[i].slots[k]);
}

static void open_conn(conn *c, uint32_t index, const struct sockaddr_in *addr) {
    c->index = index;
    c->slots = calloc((size_t)g.o.inflight, sizeof *c->slots);
    for (int k = 0; k < g.o.inflight; ++k) {
        slot *sl = &c->slots[k];
        sl->c = c;
        sl->index = (uint32_t)k;
        sl->req.data = sl;
        sl->iov = (struct iovec){&sl->frame, sizeof sl->frame};
        tl_timer_init(&sl->timeout, on_timeout, sl);
    }
    tl_stream_init(&c->s, socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c);
    if (tl_stream_connect(g.loop, &c->s, (const struct sockaddr *)addr, sizeof *addr, on_connect) <
            0 ||
        tl_stream_read_start(g.loop, &c->s, on_read) < 0) {
        fprintf(stderr, "rpc-client-tickloop: connect failed\n");
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (rpc_parse(argc, argv, &g.o) < 0) return 2;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    const char *io = "epoll", *timers = "heap4";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--io")) io = argv[i + 1];
        if (!strcmp(argv[i], "--timers")) timers = argv[i + 1];
    }
    opts.io = strcmp(io, "io_uring") == 0 ? TL_IO_URING : TL_IO_EPOLL;
    opts.timers = timers;
    int r = tl_loop_new(&g.loop, &opts);
    if (r < 0) {
        fprintf(stderr, "rpc-client-tickloop: tl_loop_new: %s\n", tl_strerror(r));
        return 1;
    }
    rpc_stats_init(&g.st);
    tl_timer_init(&g.window, on_window_end, NULL);
    tl_timer_init(&g.drain, on_drain_check, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.o.port)};
    inet_pton(AF_INET, g.o.host, &addr.sin_addr);
    g.conns = calloc((size_t)g.o.conns, sizeof *g.conns);
    for (int i = 0; i < g.o.conns; ++i) open_conn(&g.conns[i], (uint32_t)i, &addr);
    tl_loop_run(g.loop, TL_RUN_DEFAULT);
    tl_loop_stats ls;
    tl_loop_stats_get(g.loop, &ls);
    char name[64];
    snprintf(name, sizeof name, "tickloop-%s-%s", tl_loop_io_name(g.loop),
             tl_loop_timers_name(g.loop));
    rpc_report(&g.st, name, ls.iterations);
    return 0; /* the process exit closes the connections */
}
