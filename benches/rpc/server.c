/* SPDX-License-Identifier: MIT */
/*
 * The RPC benchmark's server, one and the same for every client: on
 * tickloop (epoll, heap4 by default), one loop per thread on a shared
 * SO_REUSEPORT port. Each 16-byte request is answered after a delay drawn
 * for it: 99% uniform in 0-2 ms, 1% 300 ms (marked late in the answer).
 * Every pending answer is a timer and a write request in a pool per
 * connection that grows and is reused.
 *
 *   rpc-server --port N [--threads N]     prints "listening on PORT"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "rpc_common.h"

typedef struct pending pending;
typedef struct conn {
    tl_stream s;
    tl_loop *loop;
    unsigned char carry[RPC_FRAME]; /* a request split across reads */
    size_t carried;
    pending *free_list;
    int live; /* answers not yet written */
    int closing;
    uint64_t rng;
} conn;

struct pending {
    tl_timer timer;
    tl_write_req req;
    struct iovec iov;
    rpc_frame answer;
    conn *c;
    pending *next_free;
};

static uint64_t next_rand(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void on_closed(tl_loop *loop, tl_stream *s) {
    (void)loop;
    conn *c = s->data;
    for (pending *p = c->free_list; p;) {
        pending *next = p->next_free;
        free(p);
        p = next;
    }
    free(c);
}

static void maybe_close(tl_loop *loop, conn *c) {
    if (c->closing == 1 && c->live == 0) {
        c->closing = 2;
        tl_stream_close(loop, &c->s, on_closed);
    }
}

static void on_written(tl_loop *loop, tl_write_req *req, int status) {
    (void)status;
    pending *p = req->data;
    conn *c = p->c;
    p->next_free = c->free_list;
    c->free_list = p;
    --c->live;
    maybe_close(loop, c);
}

static void on_due(tl_loop *loop, tl_timer *t) {
    pending *p = t->data;
    if (tl_stream_write(loop, &p->c->s, &p->req, &p->iov, 1, on_written) < 0)
        on_written(loop, &p->req, -EPIPE);
}

static void request(tl_loop *loop, conn *c, const unsigned char *frame) {
    pending *p = c->free_list;
    if (p) {
        c->free_list = p->next_free;
    } else {
        p = calloc(1, sizeof *p);
        p->c = c;
        tl_timer_init(&p->timer, on_due, p);
        p->req.data = p;
        p->iov = (struct iovec){&p->answer, sizeof p->answer};
    }
    memcpy(&p->answer.id, frame, sizeof p->answer.id);
    uint64_t r = next_rand(&c->rng);
    int late = r % 100 == 0;
    p->answer.late = (uint32_t)late;
    ++c->live;
    tl_timer_start(loop, &p->timer, late ? RPC_LATE_NS : (r >> 8) % 2000001ull, 0);
}

static void on_request(void *ctx, const unsigned char *frame) {
    conn *c = ctx;
    request(c->loop, c, frame);
}

static void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    conn *c = s->data;
    if (n <= 0) {
        c->closing = 1;
        tl_stream_read_stop(loop, s);
        maybe_close(loop, c);
        return;
    }
    rpc_frames(c->carry, &c->carried, buf, (size_t)n, on_request, c);
}

static void on_accept(tl_loop *loop, tl_listener *l, int fd) {
    (void)l;
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn *c = calloc(1, sizeof *c);
    c->loop = loop;
    c->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)fd * 0x2545f4914f6cdd1dull;
    tl_stream_init(&c->s, fd, c);
    tl_stream_read_start(loop, &c->s, on_read);
}

static int port;

static void *serve(void *arg) {
    (void)arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 1024) < 0) {
        perror("rpc-server: bind/listen");
        exit(1);
    }
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = "heap4";
    tl_loop *loop;
    if (tl_loop_new(&loop, &opts) < 0) exit(1);
    tl_listener l;
    tl_listener_start(loop, &l, fd, on_accept, NULL);
    tl_loop_run(loop, TL_RUN_DEFAULT); /* until killed */
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    }
    if (port <= 0 || threads < 1) {
        fprintf(stderr, "usage: rpc-server --port N [--threads N]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; ++i) pthread_create(&t[i], NULL, serve, NULL);
    usleep(100000);
    printf("listening on %d\n", port);
    fflush(stdout);
    pthread_join(t[0], NULL);
    return 0;
}
