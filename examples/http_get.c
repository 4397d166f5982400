/* SPDX-License-Identifier: MIT */
/*
 * http_get.c: fetches one URL path over HTTP/1.0 and prints the response.
 *
 * Shows how a client uses tickloop:
 * - tl_stream_connect on a fresh socket of the address's family (IPv4, IPv6;
 *   names resolved with getaddrinfo before the loop runs). The request is
 *   written and the stream half-closed (tl_stream_shutdown) right after the
 *   connect call, before the connect completes: the loop sends both once it
 *   does, in order, so the program states what it wants in one place;
 * - reading goes on after the shutdown until the server's EOF;
 * - a refused or failed connect retried from a timer (--retries N,
 *   --retry-ms N: a server that is still starting), each try on a fresh
 *   socket and stream, the old one closed first;
 * - one timer bounding the whole exchange (--timeout-ms N): on expiry the
 *   stream is closed, which cancels whatever is under way (the connect,
 *   write and shutdown callbacks then run with -ECANCELED).
 *
 *   http_get [--host NAME] [--port N] [--path /P] [--retries N] [--retry-ms N]
 *            [--timeout-ms N] [--io epoll|io_uring|auto] [--help]
 *
 * Prints the response (status line, headers, body) on stdout; exits 0 when
 * the status is 2xx, 1 otherwise (connect failed, timed out, not 2xx), 2
 * on bad arguments. Try, next to `http_hello --port 8080`:
 *   http_get --port 8080 --path /
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "example_options.h"

#define MS 1000000ull

struct client {
    tl_loop *loop;
    struct addrinfo *addrs; /* getaddrinfo's answer: tried in turn */
    struct addrinfo *addr;  /* the one being tried */
    tl_stream stream;
    int stream_open; /* stream initialised and not closed yet */
    tl_write_req req;
    char request[512];
    struct iovec iov;
    tl_timer retry, deadline;
    unsigned retries_left;
    uint64_t retry_ns;
    size_t got;     /* response bytes printed */
    char head[16];  /* the start of the response: its status code */
    int last_error; /* of the last failed connect */
    int reconnect;  /* a connect failed: try again once its stream closed */
    int timed_out;
    int done;
};

static void try_connect(struct client *c);

static void finish(struct client *c);

/* The stream is closed (its memory free for the next try): after a failed
   connect, the next address, or the retry timer. */
static void on_closed(tl_loop *loop, tl_stream *s) {
    (void)loop;
    struct client *c = s->data;
    c->stream_open = 0;
    if (c->done) {
        tl_timer_stop(c->loop, &c->deadline);
        return;
    }
    if (!c->reconnect) return;
    c->reconnect = 0;
    if (c->addr->ai_next) {
        c->addr = c->addr->ai_next;
        try_connect(c);
    } else if (c->retries_left > 0) {
        --c->retries_left;
        c->addr = c->addrs;
        tl_timer_start(c->loop, &c->retry, c->retry_ns, 0);
    } else {
        fprintf(stderr, "http_get: connect: %s\n", tl_strerror(c->last_error));
        finish(c);
    }
}

/* Ends the exchange: the stream closes, and the loop ends once it has. */
static void finish(struct client *c) {
    c->done = 1;
    tl_timer_stop(c->loop, &c->retry);
    if (!c->stream_open)
        tl_timer_stop(c->loop, &c->deadline);
    else if (!c->reconnect) /* a closing stream is not closed twice */
        tl_stream_close(c->loop, &c->stream, on_closed);
}

static void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    (void)loop;
    struct client *c = s->data;
    if (n > 0) {
        for (ptrdiff_t i = 0; i < n && c->got + (size_t)i < sizeof c->head - 1; ++i)
            c->head[c->got + (size_t)i] = ((const char *)buf)[i];
        fwrite(buf, 1, (size_t)n, stdout);
        c->got += (size_t)n;
        return;
    }
    if (n < 0) fprintf(stderr, "http_get: read: %s\n", tl_strerror((int)n));
    finish(c); /* EOF: the whole response is in */
}

static void on_written(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    (void)req;
    if (status < 0 && status != -ECANCELED)
        fprintf(stderr, "http_get: write: %s\n", tl_strerror(status));
}

static void on_shutdown(tl_loop *loop, tl_stream *s, int status) {
    (void)loop;
    (void)s;
    if (status < 0 && status != -ECANCELED)
        fprintf(stderr, "http_get: shutdown: %s\n", tl_strerror(status));
}

static void on_connect(tl_loop *loop, tl_stream *s, int status) {
    (void)loop;
    struct client *c = s->data;
    if (status == 0 || status == -ECANCELED) return; /* reading goes on / closed */
    /* Refused, unreachable...: the write, the shutdown and the reader get
       the same error after this; the next address or the retry timer goes
       on, on a fresh stream once this one is closed. */
    c->last_error = status;
    c->reconnect = 1;
    tl_stream_close(c->loop, s, on_closed);
}

/* A fresh socket and stream for c->addr: connect, write, shut down. */
static void try_connect(struct client *c) {
    const struct addrinfo *a = c->addr;
    int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "http_get: socket: %s\n", strerror(errno));
        finish(c);
        return;
    }
    tl_stream_init(&c->stream, fd, c);
    c->stream_open = 1;
    int r = tl_stream_connect(c->loop, &c->stream, a->ai_addr, a->ai_addrlen, on_connect);
    if (r == 0) r = tl_stream_read_start(c->loop, &c->stream, on_read);
    if (r == 0) r = tl_stream_write(c->loop, &c->stream, &c->req, &c->iov, 1, on_written);
    if (r == 0) r = tl_stream_shutdown(c->loop, &c->stream, on_shutdown);
    if (r < 0) {
        fprintf(stderr, "http_get: connect: %s\n", tl_strerror(r));
        finish(c);
    }
}

static void on_retry(tl_loop *loop, tl_timer *t) {
    (void)loop;
    try_connect(t->data);
}

static void on_deadline(tl_loop *loop, tl_timer *t) {
    (void)loop;
    struct client *c = t->data;
    fprintf(stderr, "http_get: timed out\n");
    c->timed_out = 1;
    finish(c);
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--host NAME] [--port N] [--path /P] [--retries N] [--retry-ms N]\n"
            "          [--timeout-ms N] [--io epoll|io_uring|auto] [--help]\n"
            "Fetches http://NAME:N/P (HTTP/1.0) and prints the response (tickloop %s).\n"
            "  defaults: --host 127.0.0.1 --port 8080 --path / --retries 0 --retry-ms 200\n"
            "            --timeout-ms 10000\n",
            argv0, tl_version());
}

static int parse_number(const char *s, unsigned long long max, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > max) return -1;
    *out = v;
    return 0;
}

/* Parses argv into the settings; 0, or the exit status (usage printed). */
static int parse_args(int argc, char **argv, const char **host, const char **port,
                      const char **path, unsigned long long num[3], tl_loop_options *opts) {
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1]; /* argv[argc] is NULL */
        unsigned long long v;
        if (strcmp(opt, "--help") == 0) {
            usage(stdout, argv[0]);
            return -1;
        } else if (val && strcmp(opt, "--host") == 0) {
            *host = val;
        } else if (val && strcmp(opt, "--port") == 0 && parse_number(val, 65535, &v) == 0) {
            *port = val;
        } else if (val && strcmp(opt, "--path") == 0 && val[0] == '/' && strlen(val) < 256) {
            *path = val;
        } else if (val && strcmp(opt, "--retries") == 0 && parse_number(val, 1000, &num[0]) == 0) {
        } else if (val && strcmp(opt, "--retry-ms") == 0 &&
                   parse_number(val, 3600000, &num[1]) == 0) {
        } else if (val && strcmp(opt, "--timeout-ms") == 0 &&
                   parse_number(val, 3600000, &num[2]) == 0 && num[2] > 0) {
        } else if (val && strcmp(opt, "--io") == 0 && parse_io_kind(val, &opts->io) == 0) {
        } else {
            static const char *const known[] = {"--host",     "--port",       "--path", "--retries",
                                                "--retry-ms", "--timeout-ms", "--io"};
            report_bad_option(argv[0], opt, val, known, sizeof known / sizeof known[0]);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *port = "8080", *path = "/";
    unsigned long long num[3] = {0, 200, 10000}; /* retries, retry-ms, timeout-ms */
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    int r = parse_args(argc, argv, &host, &port, &path, num, &opts);
    if (r) return r < 0 ? 0 : r;

    struct client c;
    memset(&c, 0, sizeof c);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    int gai = getaddrinfo(host, port, &hints, &c.addrs);
    if (gai != 0) {
        fprintf(stderr, "http_get: %s: %s\n", host, gai_strerror(gai));
        return 1;
    }
    if ((r = tl_loop_new(&c.loop, &opts)) < 0) {
        fprintf(stderr, "http_get: tl_loop_new: %s\n", tl_strerror(r));
        freeaddrinfo(c.addrs);
        return 1;
    }
    int len = snprintf(c.request, sizeof c.request,
                       "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: tickloop-http_get\r\n\r\n", path,
                       host);
    c.iov = (struct iovec){c.request, (size_t)len};
    c.retries_left = (unsigned)num[0];
    c.retry_ns = num[1] * MS;
    c.addr = c.addrs;
    tl_timer_init(&c.retry, on_retry, &c);
    tl_timer_init(&c.deadline, on_deadline, &c);
    tl_timer_start(c.loop, &c.deadline, num[2] * MS, 0);
    try_connect(&c);
    tl_loop_run(c.loop, TL_RUN_DEFAULT); /* until the stream and both timers are done */
    tl_loop_free(c.loop);
    freeaddrinfo(c.addrs);
    fflush(stdout);
    int ok = !c.timed_out && c.got > 12 && strncmp(c.head, "HTTP/1.", 7) == 0 && c.head[9] == '2';
    if (!ok && !c.timed_out && c.got == 0 && c.last_error == 0)
        fprintf(stderr, "http_get: no response\n");
    return ok ? 0 : 1;
}
