/* SPDX-License-Identifier: MIT */
/*
 * pingpong.c: a ping-pong of small messages over one loopback TCP
 * connection WITHOUT TCP_NODELAY, to check that a vectored tl_stream_write
 * goes to the kernel as one send.
 *
 * Why it matters: with Nagle's algorithm on (the default), a small segment
 * is held back while an earlier small segment is unacknowledged, and the
 * peer delays its ACK (up to 40 ms on Linux) while it has nothing to send
 * back. A 4-byte message split across two sends therefore leaves its second
 * half waiting for the ACK of the first, the peer waits for the whole
 * message before it answers, and every round stalls for the delayed ACK.
 * Sent as one sendmsg of two iovecs, the message leaves in one segment and
 * a round costs tens of microseconds, as with one buffer.
 *
 *   conn-pingpong [--io epoll|io_uring] [--bufs 1|2] [--split] [--rounds N]
 *
 * The two ends of the connection are streams on one loop (one thread). The
 * client writes a 4-byte "ping"; the server, once it has the 4 bytes, writes
 * a 4-byte "pong"; the client, once it has the 4 bytes, starts the next
 * round. --rounds rounds (default 1000).
 *   --bufs 1: each message is one tl_stream_write of one 4-byte iovec;
 *   --bufs 2: one tl_stream_write of two 2-byte iovecs;
 *   --split:  two tl_stream_write of one 2-byte iovec each, queued back
 *             to back: two requests are two sends, the stall the vectored
 *             write avoids (a round then takes about 88 ms, a delayed ACK
 *             for the ping and one for the pong; use a small --rounds).
 * Without --bufs or --split it runs 2, 1, 2, 1 (a fresh connection each,
 * same loop) and ends with ratio_2_over_1: the median of the 2-buffer times
 * over the median of the 1-buffer times (the goal: at most 1.2), after an
 * untimed warm-up run of each.
 * TICKLOOP_URING_STREAMS=readiness forces io_uring's readiness path; the
 * path that ran is printed. One line per run:
 *   pingpong io=... path=... bufs=N rounds=N seconds=X us_per_round=Y
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <tickloop/tickloop.h>

#include "conn_common.h"

#define MSG_LEN 4

enum { MODE_SPLIT = 0 }; /* a run's bufs: 1, 2, or MODE_SPLIT */

struct end {
    tl_stream s;
    tl_write_req wr[2];
    const char *msg;    /* what this end sends */
    const char *expect; /* what it receives    */
    char got[MSG_LEN];  /* the message being received */
    size_t got_len;
    int writes_pending; /* write requests queued, callbacks not yet run */
    int reply_due;      /* a whole message arrived, answer not yet queued */
    int closed;
};

static tl_loop *loop;
static struct end ends[2]; /* [0] the client (pings), [1] the server (pongs) */
static long rounds = 1000, rounds_done;
static int bufs;
static int finished;

static void fail(const char *what, int err) {
    fprintf(stderr, "conn-pingpong: %s: %s\n", what, tl_strerror(err));
    exit(1);
}

static void send_message(struct end *e);

static void check_finished(void) {
    if (rounds_done == rounds && ends[0].writes_pending == 0 && ends[1].writes_pending == 0 &&
        !finished) {
        finished = 1;
        tl_loop_stop(loop);
    }
}

static void on_written(tl_loop *l, tl_write_req *req, int status) {
    struct end *e = req->data;
    (void)l;
    if (status < 0) fail("tl_stream_write callback", status);
    e->writes_pending--;
    if (e->reply_due && e->writes_pending == 0) send_message(e);
    check_finished();
}

/* Queues e's message: with the previous one's callbacks all run, so its
 * requests are free again. */
static void send_message(struct end *e) {
    int r;
    e->reply_due = 0;
    if (bufs == 1) {
        struct iovec v = {.iov_base = (void *)e->msg, .iov_len = MSG_LEN};
        r = tl_stream_write(loop, &e->s, &e->wr[0], &v, 1, on_written);
    } else if (bufs == 2) {
        struct iovec v[2] = {{.iov_base = (void *)e->msg, .iov_len = 2},
                             {.iov_base = (void *)(e->msg + 2), .iov_len = 2}};
        r = tl_stream_write(loop, &e->s, &e->wr[0], v, 2, on_written);
    } else {
        /* --split: two writes, queued back to back, go out as two sends */
        struct iovec v = {.iov_base = (void *)e->msg, .iov_len = 2};
        r = tl_stream_write(loop, &e->s, &e->wr[0], &v, 1, on_written);
        if (r < 0) fail("tl_stream_write", r);
        e->writes_pending++;
        v.iov_base = (void *)(e->msg + 2);
        r = tl_stream_write(loop, &e->s, &e->wr[1], &v, 1, on_written);
    }
    if (r < 0) fail("tl_stream_write", r);
    e->writes_pending++;
}

static void on_read(tl_loop *l, tl_stream *s, const void *buf, ptrdiff_t n) {
    struct end *e = s->data;
    (void)l;
    if (n < 0) fail("read", (int)n);
    if (n == 0) fail("read", -EPIPE);
    if (e->got_len + (size_t)n > MSG_LEN) {
        fprintf(stderr, "conn-pingpong: %zd bytes more than a message\n", n);
        exit(1);
    }
    memcpy(e->got + e->got_len, buf, (size_t)n);
    e->got_len += (size_t)n;
    if (e->got_len < MSG_LEN) return;
    if (memcmp(e->got, e->expect, MSG_LEN) != 0) {
        fprintf(stderr, "conn-pingpong: received %.4s, expected %s\n", e->got, e->expect);
        exit(1);
    }
    e->got_len = 0;
    if (e == &ends[0] && ++rounds_done == rounds) {
        check_finished();
        return;
    }
    e->reply_due = 1;
    if (e->writes_pending == 0) send_message(e);
}

static void on_closed(tl_loop *l, tl_stream *s) {
    (void)l;
    ((struct end *)s->data)->closed = 1;
}

/* One ping-pong of `rounds` rounds on a fresh connection; returns its
 * seconds and prints its line unless quiet. */
static double run(int mode, int quiet) {
    int fds[2];
    int r = cb_tcp_pair(fds);
    if (r < 0) fail("loopback connection", r);
    /* No TCP_NODELAY: Nagle stays on, that is the point. */

    bufs = mode;
    rounds_done = 0;
    finished = 0;
    static const char *const msgs[2] = {"ping", "pong"};
    for (int i = 0; i < 2; i++) {
        struct end *e = &ends[i];
        memset(e, 0, sizeof *e);
        e->msg = msgs[i];
        e->expect = msgs[!i];
        tl_stream_init(&e->s, fds[i], e);
        e->wr[0].data = e->wr[1].data = e;
        r = tl_stream_read_start(loop, &e->s, on_read);
        if (r < 0) fail("tl_stream_read_start", r);
    }

    uint64_t t0 = cb_now_ns();
    send_message(&ends[0]);
    r = tl_loop_run(loop, TL_RUN_DEFAULT);
    if (r < 0) fail("tl_loop_run", r);
    double secs = (double)(cb_now_ns() - t0) / 1e9;
    if (!finished) {
        fprintf(stderr, "conn-pingpong: the loop stopped after %ld rounds\n", rounds_done);
        exit(1);
    }
    const char *bufs_name = mode == MODE_SPLIT ? "split" : mode == 1 ? "1" : "2";
    if (!quiet)
        printf("pingpong io=%s path=%s bufs=%s rounds=%ld seconds=%.6f us_per_round=%.2f\n",
               tl_loop_io_name(loop), tl_loop_stream_path(loop), bufs_name, rounds, secs,
               secs * 1e6 / (double)rounds);
    fflush(stdout);

    for (int i = 0; i < 2; i++) {
        if ((r = tl_stream_close(loop, &ends[i].s, on_closed)) < 0) fail("tl_stream_close", r);
    }
    if ((r = tl_loop_run(loop, TL_RUN_DEFAULT)) < 0) fail("tl_loop_run", r);
    if (!ends[0].closed || !ends[1].closed) fail("tl_stream_close: no callback", -EIO);
    return secs;
}

static int usage(void) {
    fprintf(stderr, "usage: conn-pingpong [--io epoll|io_uring] [--bufs 1|2] [--split] "
                    "[--rounds N]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *io = "epoll";
    int mode = -1; /* -1: 2, 1, 2, 1 and the ratio */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--split") == 0) {
            mode = MODE_SPLIT;
        } else if (i + 1 < argc && strcmp(argv[i], "--io") == 0) {
            io = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--bufs") == 0) {
            char *end;
            mode = (int)strtol(argv[++i], &end, 10);
            if (*end || (mode != 1 && mode != 2)) return usage();
        } else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0) {
            char *end;
            rounds = strtol(argv[++i], &end, 10);
            if (*end || rounds < 1) return usage();
        } else {
            return usage();
        }
    }
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    if (strcmp(io, "io_uring") == 0)
        opts.io = TL_IO_URING;
    else if (strcmp(io, "epoll") == 0)
        opts.io = TL_IO_EPOLL;
    else
        return usage();
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        const char *why = tl_loop_new_error();
        fprintf(stderr, "conn-pingpong: tl_loop_new: %s\n", why ? why : tl_strerror(r));
        return 1;
    }

    if (mode >= 0) {
        run(mode, 0);
    } else {
        /* An untimed warm-up of each first: the first run of a process
         * took about twice as long (page faults, the loop's first sends,
         * the CPU's clock), whichever its bufs, and the 2-buffer run that
         * comes first would carry it. Then interleaved, so a drift in the
         * machine's speed hits both alike; with two runs each, the median
         * is their mean. */
        run(1, 1);
        run(2, 1);
        double t2 = 0, t1 = 0;
        for (int k = 0; k < 2; k++) {
            t2 += run(2, 0);
            t1 += run(1, 0);
        }
        printf("ratio_2_over_1=%.3f\n", t2 / t1);
    }
    if ((r = tl_loop_free(loop)) < 0) fail("tl_loop_free", r);
    return 0;
}
