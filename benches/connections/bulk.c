/* SPDX-License-Identifier: MIT */
/*
 * bulk.c: bulk throughput through one stream, both ways at once: the two
 * ends of one loopback TCP connection on one tickloop loop (one thread, one
 * core), each sending --bytes (default 1 GiB) while reading what the other
 * sends.
 *
 *   conn-bulk [--mode readiness|streams] [--io epoll|io_uring]
 *             [--bytes N] [--write N] [--read N]
 *
 * readiness: tl_io watchers, recv() into a --read buffer (default 64 KiB)
 *            and send() of --write chunks (default 256 KiB) by the caller;
 * streams:   tl_stream_read_start with the loop's read buffers of --read
 *            bytes, and two tl_stream_write of --write bytes queued at a
 *            time per end.
 * Prints one line: mode, io, stream path, seconds, GiB/s (both directions
 * together), the process's CPU seconds and the loop's iterations (each one
 * I/O wait; counted by the loop, so no tracer slows the run to see them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "conn_common.h"

struct end {
    int fd;
    uint64_t sent, queued, received;
    tl_io io;
    tl_stream s;
    tl_write_req wr[2];
    struct iovec iov[2];
};

static tl_loop *loop;
static struct end ends[2];
static uint64_t total = 1ull << 30;
static size_t write_len = 256 * 1024, read_len = 64 * 1024;
static char *out_buf, *in_buf;
static int done_ends;

static void fail(const char *what, int err) {
    fprintf(stderr, "conn-bulk: %s: %s\n", what, strerror(err));
    exit(1);
}

static void end_check_done(struct end *e) {
    if (e->sent == total && e->received == total) {
        if (++done_ends == 2) tl_loop_stop(loop);
    }
}

/* readiness: the caller's recv() and send() */
static void on_io(tl_loop *l, tl_io *w, unsigned revents) {
    struct end *e = w->data;
    if ((revents & (TL_READ | TL_ERROR | TL_HUP)) && e->received < total) {
        for (;;) {
            ssize_t n = recv(e->fd, in_buf, read_len, 0);
            if (n > 0) {
                e->received += (uint64_t)n;
                if ((size_t)n < read_len) break;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
            fail("recv", n == 0 ? EPIPE : errno);
        }
    }
    if ((revents & TL_WRITE) && e->sent < total) {
        while (e->sent < total) {
            size_t len = total - e->sent < write_len ? (size_t)(total - e->sent) : write_len;
            ssize_t n = send(e->fd, out_buf, len, MSG_NOSIGNAL);
            if (n > 0) {
                e->sent += (uint64_t)n;
                if ((size_t)n < len) break;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
            fail("send", errno);
        }
    }
    unsigned want = (e->received < total ? TL_READ : 0) | (e->sent < total ? TL_WRITE : 0);
    if (want == 0) {
        tl_io_stop(l, w);
        end_check_done(e);
    } else if (want != w->events) {
        tl_io_start(l, w, want);
    }
}

/* streams: the loop's reads and writes */
static void queue_write(struct end *e, int slot);

static void on_written(tl_loop *l, tl_write_req *req, int status) {
    struct end *e = req->data;
    (void)l;
    if (status < 0) fail("tl_stream_write", -status);
    int slot = (int)(req - e->wr);
    e->sent += e->iov[slot].iov_len;
    if (e->queued < total)
        queue_write(e, slot);
    else
        end_check_done(e);
}

static void queue_write(struct end *e, int slot) {
    size_t len = total - e->queued < write_len ? (size_t)(total - e->queued) : write_len;
    e->iov[slot].iov_base = out_buf;
    e->iov[slot].iov_len = len;
    e->queued += len;
    int r = tl_stream_write(loop, &e->s, &e->wr[slot], &e->iov[slot], 1, on_written);
    if (r < 0) fail("tl_stream_write", -r);
}

static void on_read(tl_loop *l, tl_stream *s, const void *buf, ptrdiff_t n) {
    struct end *e = s->data;
    (void)buf;
    if (n <= 0) fail("read", n == 0 ? EPIPE : (int)-n);
    e->received += (uint64_t)n;
    if (e->received >= total) {
        tl_stream_read_stop(l, s);
        end_check_done(e);
    }
}

static void on_closed(tl_loop *l, tl_stream *s) {
    (void)l;
    (void)s;
}

/* One end: no Nagle, non-blocking; on streams reading and its first two
 * writes queued, in readiness mode watched for both directions. */
static void start_end(struct end *e, int streams) {
    int r, one = 1;
    setsockopt(e->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(e->fd, F_SETFL, fcntl(e->fd, F_GETFL) | O_NONBLOCK);
    if (streams) {
        tl_stream_init(&e->s, e->fd, e);
        e->wr[0].data = e->wr[1].data = e;
        if ((r = tl_stream_read_start(loop, &e->s, on_read)) < 0) fail("tl_stream_read_start", -r);
        queue_write(e, 0);
        if (e->queued < total) queue_write(e, 1);
    } else {
        tl_io_init(&e->io, e->fd, on_io, e);
        if ((r = tl_io_start(loop, &e->io, TL_READ | TL_WRITE)) < 0) fail("tl_io_start", -r);
    }
}

int main(int argc, char **argv) {
    const char *mode = "streams", *io = "epoll";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mode") == 0)
            mode = argv[i + 1];
        else if (strcmp(argv[i], "--io") == 0)
            io = argv[i + 1];
        else if (strcmp(argv[i], "--bytes") == 0)
            total = strtoull(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--write") == 0)
            write_len = strtoul(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--read") == 0)
            read_len = strtoul(argv[i + 1], NULL, 0);
        else {
            fprintf(stderr, "conn-bulk: unknown option %s (see the top of bulk.c)\n", argv[i]);
            return 2;
        }
    }
    if (argc % 2 == 0 || total == 0 || write_len == 0 || read_len == 0) {
        fprintf(stderr, "usage: conn-bulk [--mode readiness|streams] [--io epoll|io_uring] "
                        "[--bytes N] [--write N] [--read N]\n");
        return 2;
    }
    int streams = strcmp(mode, "streams") == 0;
    if (!streams && strcmp(mode, "readiness") != 0) {
        fprintf(stderr, "conn-bulk: --mode must be readiness or streams\n");
        return 2;
    }
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = strcmp(io, "io_uring") == 0 ? TL_IO_URING : TL_IO_EPOLL;
    opts.read_buffer_size = (uint32_t)read_len;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) fail("tl_loop_new", -r);
    out_buf = malloc(write_len);
    in_buf = malloc(read_len);
    if (!out_buf || !in_buf) fail("malloc", ENOMEM);
    memset(out_buf, 'x', write_len);

    /* One loopback TCP connection: ends[0] connects, ends[1] is accepted. */
    int fds[2];
    if ((r = cb_tcp_pair(fds)) < 0) fail("loopback connection", -r);
    ends[0].fd = fds[0];
    ends[1].fd = fds[1];

    uint64_t t0 = cb_now_ns();
    for (int i = 0; i < 2; i++) start_end(&ends[i], streams);
    r = tl_loop_run(loop, TL_RUN_DEFAULT);
    if (r < 0) fail("tl_loop_run", -r);
    double secs = (double)(cb_now_ns() - t0) / 1e9;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec / 1e6;
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    printf("bulk mode=%s io=%s path=%s bytes_each_way=%llu seconds=%.3f gib_per_s=%.3f "
           "cpu_s=%.3f iterations=%llu\n",
           mode, tl_loop_io_name(loop), streams ? tl_loop_stream_path(loop) : "caller",
           (unsigned long long)total, secs, 2.0 * (double)total / (1 << 30) / secs, cpu,
           (unsigned long long)st.iterations);
    for (int i = 0; i < 2; i++) {
        if (streams) {
            tl_stream_close(loop, &ends[i].s, on_closed);
        } else {
            tl_io_stop(loop, &ends[i].io);
            close(ends[i].fd);
        }
    }
    tl_loop_run(loop, TL_RUN_DEFAULT); /* the close callbacks */
    return tl_loop_free(loop) < 0;
}
