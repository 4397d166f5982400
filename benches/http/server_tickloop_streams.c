/* SPDX-License-Identifier: MIT */
/*
 * server_tickloop_streams.c: the HTTP throughput benchmark's server on
 * tickloop's streams and listeners, beside server_tickloop.c (readiness):
 * the loop accepts, reads and writes. On io_uring that is a multishot
 * accept, a multishot receive per connection into the loop's buffer ring
 * and sends as submissions, all in the iteration's one io_uring_enter; on
 * epoll it is readiness plus recv()/send() done by the loop.
 *   server-tickloop-streams [--port N] [--io epoll|io_uring]
 *                           [--io-batch off|adaptive:US|fixed:US]
 * Single-threaded; all request handling is http_core.c's. See run.sh.
 *
 * The adapter works like libuv's stream mode in server_libuv.c: what a read
 * callback is given is appended to the handler's input buffer, the
 * responses are written with one tl_stream_write from the output buffer,
 * and no new request is answered while that write is queued (the output
 * buffer must stay unchanged until the write callback).
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "http_core.h"
#include "tickloop_new.h"

#define MS ((uint64_t)1000000)

/* The loop's read buffer size: one read callback gets at most this much.
 * Reading goes on only while that much fits in the handler's 4 KiB input
 * buffer, so a read never has to be cut. */
enum { READ_BUF = HB_IN_CAP / 2 };

struct conn {
    struct hb_conn h;
    tl_stream s;
    tl_write_req wr;
    struct iovec iov; /* the queued write's: must live until its callback */
    tl_timer idle;
    int reading, writing, closing;
};

static tl_loop *loop;

static void on_closed(tl_loop *l, tl_stream *s) {
    (void)l;
    free(s->data);
}

static void conn_close(struct conn *c) {
    if (c->closing) return;
    c->closing = 1;
    tl_timer_stop(loop, &c->idle);
    tl_stream_close(loop, &c->s, on_closed); /* cancels a queued write */
}

static void on_idle(tl_loop *l, tl_timer *t) {
    (void)l;
    conn_close(t->data);
}

static void on_read(tl_loop *l, tl_stream *s, const void *buf, ptrdiff_t n);
static void on_written(tl_loop *l, tl_write_req *req, int status);

/* Answers what is buffered, queues the responses, and reads only while a
 * whole read buffer fits in the input buffer. */
static void serve(struct conn *c) {
    if (!c->writing) {
        if (hb_process(&c->h) > 0) tl_timer_start(loop, &c->idle, HB_IDLE_MS * MS, 0);
        if (c->h.out_len > 0) {
            c->iov.iov_base = c->h.out;
            c->iov.iov_len = c->h.out_len;
            if (tl_stream_write(loop, &c->s, &c->wr, &c->iov, 1, on_written) < 0) {
                conn_close(c);
                return;
            }
            c->writing = 1;
        } else if (c->h.close_after || c->h.peer_closed) {
            conn_close(c); /* answered, or EOF with at most a partial request */
            return;
        }
    }
    int want = !c->h.peer_closed && !c->h.close_after && HB_IN_CAP - c->h.in_len >= READ_BUF;
    if (want == c->reading) return;
    if (!want && !c->writing && !c->h.peer_closed && !c->h.close_after) {
        conn_close(c); /* half the input buffer without a complete header */
        return;
    }
    int r = want ? tl_stream_read_start(loop, &c->s, on_read) : tl_stream_read_stop(loop, &c->s);
    if (r < 0) {
        conn_close(c);
        return;
    }
    c->reading = want;
}

static void on_written(tl_loop *l, tl_write_req *req, int status) {
    struct conn *c = req->data;
    (void)l;
    c->writing = 0;
    if (c->closing) return; /* -ECANCELED by the close */
    c->h.out_off = c->h.out_len = 0;
    if (status < 0 || c->h.close_after) {
        conn_close(c);
        return;
    }
    serve(c); /* requests read while the write was queued */
}

static void on_read(tl_loop *l, tl_stream *s, const void *buf, ptrdiff_t n) {
    struct conn *c = s->data;
    (void)l;
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (n == 0) {
        c->h.peer_closed = 1;
        c->reading = 0; /* reading has stopped */
    } else {
        memcpy(c->h.in + c->h.in_len, buf, (size_t)n); /* fits: see READ_BUF */
        c->h.in_len += (size_t)n;
    }
    serve(c);
}

static void on_accept(tl_loop *l, tl_listener *lst, int fd) {
    (void)lst;
    if (fd < 0) return; /* -EMFILE, ...: the loop pauses accepting by itself */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn *c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
    hb_conn_init(&c->h, fd);
    tl_stream_init(&c->s, fd, c);
    c->wr.data = c;
    c->writing = c->closing = 0;
    c->reading = 1;
    tl_timer_init(&c->idle, on_idle, c);
    if (tl_stream_read_start(l, &c->s, on_read) < 0 ||
        tl_timer_start(l, &c->idle, HB_IDLE_MS * MS, 0) < 0)
        conn_close(c);
}

int main(int argc, char **argv) {
    const char *io = "epoll";
    struct hb_io_batch batch;
    int port = hb_parse_args_batch(argc, argv, "--io", &io, &batch);
    loop = hb_tickloop_new("server-tickloop-streams", io, READ_BUF, &batch);
    static tl_listener listener;
    int r = tl_listener_start(loop, &listener, hb_listen(port), on_accept, NULL);
    if (r < 0) {
        fprintf(stderr, "server-tickloop-streams: tl_listener_start: %s\n", tl_strerror(r));
        return 1;
    }
    fprintf(stderr, "server-tickloop-streams: io %s, %s path\n", tl_loop_io_name(loop),
            tl_loop_stream_path(loop));
    r = tl_loop_run(loop, TL_RUN_DEFAULT); /* until killed */
    fprintf(stderr, "server-tickloop-streams: tl_loop_run: %s\n", tl_strerror(r));
    return 1;
}
