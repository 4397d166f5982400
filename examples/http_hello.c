/* SPDX-License-Identifier: MIT */
/*
 * http_hello.c: a keep-alive HTTP/1.1 server answering GET / with "Hello, World!".
 *
 * Shows how a real server uses tickloop:
 * - streams and listeners: the loop accepts, reads and writes (on io_uring a
 *   multishot accept, a multishot receive per connection into the loop's
 *   buffer ring and sends as submissions, all in one io_uring_enter per
 *   iteration; on epoll readiness plus recv()/send() done by the loop);
 * - one loop per worker thread, each with its own SO_REUSEPORT listener, so the
 *   kernel spreads connections over the threads and no state is shared; the
 *   port is shared only between this process's threads: a port another
 *   process listens on is refused unless --reuseport asks to share it;
 * - a per-connection idle timer restarted on every request: the heartbeat
 *   pattern, tl_timer_start() on an active timer reschedules it (O(1) on the
 *   wheels, O(log n) on the heaps) with no allocation;
 * - a second timer bounding how long one request's header may take to arrive,
 *   so a slow client (slowloris) cannot hold a connection with a trickle;
 * - pipelined requests answered in order with one write per batch, and
 *   back-pressure: while a batch is being written no new request is answered,
 *   and reading stops once a request header's worth of input is waiting, so a
 *   client that does not read its responses is not read from either;
 * - EMFILE on accept without spinning: the loop pauses accepting by itself,
 *   and a reserved descriptor is given up to accept and close one pending
 *   connection each time, so that clients see a close instead of hanging;
 * - signals handled by the main thread's loop (tl_signal), which stops the
 *   workers with tl_async; every handle is stopped and every loop freed, the
 *   statistics are printed (with each loop's timer lateness from
 *   tl_loop_lateness), and the process exits 0.
 *
 *   http_hello [--port N] [--bind ADDR] [--threads N] [--idle-ms N]
 *              [--header-ms N] [--io epoll|io_uring|auto] [--timers NAME]
 *              [--reuseport] [--help]
 *
 * Once every worker is ready it prints "listening on ADDR:PORT ..." on stdout
 * (--port 0 lets the kernel pick a free port). Try:
 *   curl -v http://127.0.0.1:8080/          wrk -t2 -c256 -d3s http://127.0.0.1:8080/
 *
 * The tl_*_stop() calls below are not checked: they fail only on misuse
 * (a NULL handle, or one active on another loop), which this file never does.
 */
#define _GNU_SOURCE /* accept4, SO_REUSEPORT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "loop_new_error.h"

#define MS ((uint64_t)1000000)

enum {
    /* A request header larger than this is answered with 431 and the
     * connection closed, as most servers do (nginx's default is 1 KiB + 8 KiB). */
    IN_CAP = 4096,
    /* The loop's read buffers (tl_loop_options.read_buffer_size): one read
     * callback gets at most this much. The input buffer has room for IN_CAP
     * plus one of them and reading goes on while less than IN_CAP is
     * waiting, so what a callback is given always fits. */
    READ_BUF = 4096,
    /* Room for the responses of a batch of pipelined requests; requests are
     * parsed only while a whole response still fits. */
    OUT_CAP = 16384,
    RESPONSE_MAX = 256,
    MAX_THREADS = 256,
};

static const char HELLO_BODY[] = "Hello, World!\n";

/* The answer to nearly every request, formatted once: snprintf per response
 * cost more than the rest of the request's handling together. It must stay
 * byte-for-byte what conn_respond() would write for "200 OK" + HELLO_BODY. */
static const char HELLO_RESPONSE[] = "HTTP/1.1 200 OK\r\nServer: tickloop\r\n"
                                     "Content-Type: text/plain\r\nContent-Length: 14\r\n\r\n"
                                     "Hello, World!\n";

struct config {
    struct sockaddr_storage addr; /* IPv4 or IPv6, port unset */
    int port;
    int threads;
    uint64_t idle_ns;
    uint64_t header_ns;
    int reuseport; /* share the port with other processes (--reuseport) */
    tl_loop_options loop_options;
};

struct worker;

struct conn {
    tl_stream stream;
    tl_write_req write;
    struct iovec iov; /* the queued write's, unchanged until its callback */
    tl_timer idle;    /* closes a connection with no request for idle_ns       */
    tl_timer header;  /* closes a connection whose request header is too slow */
    struct worker *worker;
    struct conn *prev, *next;
    int reading;           /* tl_stream_read_start is in effect */
    int writing;           /* out[out_off, out_len) is queued: left alone until written */
    int closing;           /* tl_stream_close called; freed in its callback */
    int peer_closed;       /* read EOF: answer what was received, then close */
    int close_after_write; /* "Connection: close", HTTP/1.0 or a bad request */
    int keep_alive_10;     /* this request is HTTP/1.0 with "Connection: keep-alive" */
    size_t in_len;
    size_t out_off, out_len;
    char in[IN_CAP + READ_BUF];
    char out[OUT_CAP];
};

struct server;

struct worker {
    int index;
    pthread_t thread;
    struct server *server;
    int listen_fd;
    int spare_fd; /* reserved for the EMFILE trick; -1 while given up */
    tl_loop *loop;
    tl_listener listener;
    tl_async stop;
    struct conn *conns;
    int setup_err; /* 0, or the negative errno that made setup fail */
    int exit_err;  /* 0, or the negative errno of the final tl_loop_free */
    /* Counters, read by the main thread after the worker has finished. */
    uint64_t accepted, requests, idle_closed, header_closed, shed, accept_pauses;
    tl_loop_stats stats;
    tl_lateness lateness; /* how late the loop ran the idle/header timers */
};

struct server {
    struct config cfg;
    tl_loop *loop; /* the main thread's: signals and worker exits */
    tl_signal sigint, sigterm;
    tl_async worker_exit;
    pthread_barrier_t ready;
    struct worker *workers;
    int started; /* threads created */
    atomic_int finished;
    int stopping;
    int exit_code;
};

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

static void conn_on_closed(tl_loop *loop, tl_stream *s) {
    (void)loop;
    free(s->data);
}

/* Stops c's timers and closes its stream; the loop closes the socket,
 * cancels a queued write and then calls conn_on_closed, which frees c. */
static void conn_close(struct conn *c) {
    struct worker *w = c->worker;
    if (c->closing) return;
    c->closing = 1;
    tl_timer_stop(w->loop, &c->idle);
    tl_timer_stop(w->loop, &c->header);
    tl_stream_close(w->loop, &c->stream, conn_on_closed);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
}

static void conn_on_idle(tl_loop *loop, tl_timer *t) {
    struct conn *c = t->data;
    (void)loop;
    c->worker->idle_closed++;
    conn_close(c); /* a callback may free the timers it belongs to */
}

static void conn_on_header_timeout(tl_loop *loop, tl_timer *t) {
    struct conn *c = t->data;
    (void)loop;
    c->worker->header_closed++;
    conn_close(c);
}

/* Finds a header in [headers, end) and returns its value, or NULL. */
/* The request headers this server acts on, found in one pass. */
struct request_headers {
    const char *connection, *content_length; /* values, or NULL if absent */
    size_t connection_len, content_length_len;
    int transfer_encoding;
};

/* Matches the header line [line, eol) against name (lower case, ending in
 * ':'); returns its value with leading blanks skipped, or NULL. */
static const char *header_match(const char *line, const char *eol, const char *name,
                                size_t name_len, size_t *value_len) {
    if ((size_t)(eol - line) < name_len || strncasecmp(line, name, name_len) != 0) return NULL;
    const char *v = line + name_len;
    while (v < eol && (*v == ' ' || *v == '\t')) v++;
    *value_len = (size_t)(eol - v);
    return v;
}

/* One pass over the header lines [headers, end) (each ending in CRLF): only
 * lines starting with 'c' or 't' are compared, so a typical request (Host,
 * User-Agent, Accept) costs a memchr per line. */
static void scan_headers(const char *headers, const char *end, struct request_headers *h) {
    static const char connection[] = "connection:", content_length[] = "content-length:",
                      transfer_encoding[] = "transfer-encoding:";
    memset(h, 0, sizeof *h);
    size_t len;
    for (const char *line = headers; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        eol = eol ? eol - 1 : end;
        const char *v;
        switch (*line | 0x20) {
        case 'c':
            if ((v = header_match(line, eol, connection, sizeof connection - 1, &len))) {
                h->connection = v;
                h->connection_len = len;
            } else if ((v = header_match(line, eol, content_length, sizeof content_length - 1,
                                         &len))) {
                h->content_length = v;
                h->content_length_len = len;
            }
            break;
        case 't':
            if (header_match(line, eol, transfer_encoding, sizeof transfer_encoding - 1, &len))
                h->transfer_encoding = 1;
            break;
        }
        line = eol + 2;
    }
}

static int value_has_token(const char *v, size_t len, const char *token) {
    size_t n = strlen(token);
    for (size_t i = 0; i + n <= len; i++)
        if (strncasecmp(v + i, token, n) == 0) return 1;
    return 0;
}

static void conn_respond(struct conn *c, const char *status, const char *body, int head_only) {
    if (body == HELLO_BODY && !head_only && !c->close_after_write && !c->keep_alive_10) {
        memcpy(c->out + c->out_len, HELLO_RESPONSE, sizeof HELLO_RESPONSE - 1);
        c->out_len += sizeof HELLO_RESPONSE - 1;
        return;
    }
    size_t body_len = strlen(body);
    int n = snprintf(c->out + c->out_len, OUT_CAP - c->out_len,
                     "HTTP/1.1 %s\r\nServer: tickloop\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n%s\r\n%s",
                     status, body_len,
                     c->close_after_write ? "Connection: close\r\n"
                     : c->keep_alive_10   ? "Connection: keep-alive\r\n"
                                          : "",
                     head_only ? "" : body);
    /* RESPONSE_MAX bounds every response this server writes. */
    if (n > 0 && (size_t)n < OUT_CAP - c->out_len) c->out_len += (size_t)n;
}

/* Answers one complete request header [req, req + len), which ends in CRLFCRLF. */
static void conn_handle_request(struct conn *c, const char *req, size_t len) {
    const char *end = req + len - 2;                            /* keep the last header's CRLF */
    const char *eol = (const char *)memchr(req, '\n', len) - 1; /* the request line's CR */
    const char *sp1 = memchr(req, ' ', (size_t)(eol - req));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (!sp1 || !sp2) {
        c->close_after_write = 1;
        conn_respond(c, "400 Bad Request", "bad request line\n", 0);
        return;
    }
    size_t method_len = (size_t)(sp1 - req);
    const char *target = sp1 + 1;
    size_t target_len = (size_t)(sp2 - target);
    const char *version = sp2 + 1;
    size_t version_len = (size_t)(eol - version);
    int http10 = version_len == 8 && memcmp(version, "HTTP/1.0", 8) == 0;
    int http11 = version_len == 8 && memcmp(version, "HTTP/1.1", 8) == 0;
    int get = method_len == 3 && memcmp(req, "GET", 3) == 0;
    int head = method_len == 4 && memcmp(req, "HEAD", 4) == 0;

    /* HTTP/1.1 keeps the connection unless told otherwise; 1.0 closes it
     * unless told otherwise. */
    struct request_headers h;
    scan_headers(eol + 2, end, &h);
    const char *conn_hdr = h.connection;
    size_t vlen = h.connection_len;
    if (conn_hdr && value_has_token(conn_hdr, vlen, "close")) c->close_after_write = 1;
    /* An HTTP/1.0 client that asked to keep the connection (RFC 7230
     * section 6.3, appendix A.1.2) only keeps it if the response says so with
     * "Connection: keep-alive"; otherwise it waits for a close that never
     * comes (ab -k). */
    c->keep_alive_10 = 0;
    if (http10 && !(conn_hdr && value_has_token(conn_hdr, vlen, "keep-alive")))
        c->close_after_write = 1;
    else if (http10 && !c->close_after_write)
        c->keep_alive_10 = 1;

    /* This server never reads request bodies, so a request announcing one
     * would desynchronise the pipeline: answer and close instead. */
    int has_body =
        (h.content_length && !(h.content_length_len == 1 && h.content_length[0] == '0')) ||
        h.transfer_encoding;

    if (!http10 && !http11) {
        c->close_after_write = 1;
        conn_respond(c, "505 HTTP Version Not Supported", "HTTP/1.0 and 1.1 only\n", 0);
    } else if (has_body) {
        c->close_after_write = 1;
        conn_respond(c, "413 Content Too Large", "no request bodies here\n", 0);
    } else if (!get && !head) {
        c->close_after_write = 1;
        conn_respond(c, "405 Method Not Allowed", "GET or HEAD only\n", 0);
    } else if (target_len == 1 && target[0] == '/') {
        conn_respond(c, "200 OK", HELLO_BODY, head);
    } else {
        conn_respond(c, "404 Not Found", "not found\n", head);
    }
    c->worker->requests++;
}

/* The first CRLFCRLF in [p, p + len), or NULL: memchr from CR to CR (glibc's
 * generic memmem took a third of the server's instructions). */
static const char *find_header_end(const char *p, size_t len) {
    const char *end = p + len;
    while (end - p >= 4) {
        const char *cr = memchr(p, '\r', (size_t)(end - p - 3));
        if (!cr) return NULL;
        if (cr[1] == '\n' && cr[2] == '\r' && cr[3] == '\n') return cr;
        p = cr + 1;
    }
    return NULL;
}

/* Parses every complete request in the input buffer while a response fits in
 * the output buffer, then (re)arms the timers. Returns -1 if c was closed. */
static int conn_process(struct conn *c) {
    tl_loop *loop = c->worker->loop;
    if (c->out_off > 0) { /* keep the unsent output at the front */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    size_t off = 0;
    int served = 0;
    while (!c->close_after_write && OUT_CAP - c->out_len >= RESPONSE_MAX) {
        /* A header must end within IN_CAP bytes of its start. */
        size_t avail = c->in_len - off;
        const char *end = find_header_end(c->in + off, avail < IN_CAP ? avail : IN_CAP);
        if (!end) {
            if (off == 0 && c->in_len >= IN_CAP) {
                c->close_after_write = 1;
                conn_respond(c, "431 Request Header Fields Too Large", "header too large\n", 0);
                served = 1;
            }
            break;
        }
        size_t req_len = (size_t)(end + 4 - (c->in + off));
        conn_handle_request(c, c->in + off, req_len);
        off += req_len;
        served = 1;
    }
    if (off > 0) memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;

    int r = 0;
    /* The heartbeat: each request pushes the idle deadline back. */
    if (served) r = tl_timer_start(loop, &c->idle, c->worker->server->cfg.idle_ns, 0);
    /* The header timer runs from the first byte of a request to its end; a
     * new partial request restarts it, a partial one still arriving does not. */
    if (r == 0 && c->in_len == 0)
        tl_timer_stop(loop, &c->header);
    else if (r == 0 && (served || !tl_timer_active(&c->header)))
        r = tl_timer_start(loop, &c->header, c->worker->server->cfg.header_ns, 0);
    if (r < 0) {
        fprintf(stderr, "http_hello: tl_timer_start: %s\n", tl_strerror(r));
        conn_close(c);
        return -1;
    }
    return 0;
}

static void conn_on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n);
static void conn_on_written(tl_loop *loop, tl_write_req *req, int status);

/* Answers the complete requests waiting (unless a write is queued: the output
 * buffer must stay as it is until then), queues the responses in one write,
 * and reads while less than a request header's worth of input waits. */
static void conn_pump(struct conn *c) {
    tl_loop *loop = c->worker->loop;
    if (!c->writing) {
        if (conn_process(c) < 0) return;
        if (c->out_len > c->out_off) {
            c->iov.iov_base = c->out + c->out_off;
            c->iov.iov_len = c->out_len - c->out_off;
            int r = tl_stream_write(loop, &c->stream, &c->write, &c->iov, 1, conn_on_written);
            if (r < 0) {
                fprintf(stderr, "http_hello: tl_stream_write: %s\n", tl_strerror(r));
                conn_close(c);
                return;
            }
            c->writing = 1;
        } else if (c->close_after_write || c->peer_closed) {
            conn_close(c); /* all answered, or EOF after a partial request */
            return;
        }
    }
    int want = !c->peer_closed && !c->close_after_write && c->in_len < IN_CAP;
    if (want == c->reading) return;
    int r = want ? tl_stream_read_start(loop, &c->stream, conn_on_read)
                 : tl_stream_read_stop(loop, &c->stream);
    if (r < 0) {
        fprintf(stderr, "http_hello: reading: %s\n", tl_strerror(r));
        conn_close(c);
        return;
    }
    c->reading = want;
}

/* Every byte of the batch went to the kernel (status 0), or the client is
 * gone; -ECANCELED when conn_close came first. */
static void conn_on_written(tl_loop *loop, tl_write_req *req, int status) {
    struct conn *c = req->data;
    (void)loop;
    c->writing = 0;
    if (c->closing) return;
    c->out_off = c->out_len = 0;
    if (status < 0 || c->close_after_write) {
        conn_close(c); /* EPIPE, ECONNRESET, or the last response is out */
        return;
    }
    conn_pump(c); /* requests that arrived while the batch was written */
}

static void conn_on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    struct conn *c = s->data;
    (void)loop;
    if (n < 0) {
        conn_close(c); /* ECONNRESET, ...: the client is gone */
        return;
    }
    if (n == 0) {
        c->peer_closed = 1; /* reading has stopped: answer what is here */
        c->reading = 0;
    } else {
        memcpy(c->in + c->in_len, buf, (size_t)n); /* fits: see READ_BUF */
        c->in_len += (size_t)n;
    }
    conn_pump(c);
}

/* Takes fd into a new connection. Returns 0, or a negative errno with fd
 * still the caller's. */
static int conn_open(struct worker *w, int fd) {
    struct conn *c = malloc(sizeof *c); /* the buffers need no zeroing */
    if (!c) return -ENOMEM;
    /* Each batch of responses is written whole; Nagle would only hold back
     * the next batch until the previous one is acknowledged. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->worker = w;
    c->reading = c->writing = c->closing = 0;
    c->peer_closed = c->close_after_write = c->keep_alive_10 = 0;
    c->in_len = c->out_off = c->out_len = 0;
    tl_stream_init(&c->stream, fd, c);
    c->write.data = c;
    tl_timer_init(&c->idle, conn_on_idle, c);
    tl_timer_init(&c->header, conn_on_header_timeout, c);
    int r = tl_stream_read_start(w->loop, &c->stream, conn_on_read);
    if (r < 0) {
        free(c); /* never bound to the loop: nothing of it is left there */
        return r;
    }
    c->reading = 1;
    c->prev = NULL;
    c->next = w->conns;
    if (w->conns) w->conns->prev = c;
    w->conns = c;
    w->accepted++;
    r = tl_timer_start(w->loop, &c->idle, w->server->cfg.idle_ns, 0);
    if (r < 0) {
        fprintf(stderr, "http_hello: tl_timer_start: %s\n", tl_strerror(r));
        conn_close(c); /* closes fd too */
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Accepting                                                                */
/* ------------------------------------------------------------------------ */

/* Out of descriptors, the loop pauses accepting, but the connections waiting
 * in the backlog would hang there until descriptors come back. Giving up the
 * reserved descriptor lets us accept one and close it at once (the client
 * sees the connection closed), then we reserve again. */
static void accept_shed(struct worker *w) {
    if (w->spare_fd < 0) w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (w->spare_fd < 0) return;
    close(w->spare_fd);
    int fd = accept4(w->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        w->shed++;
    }
    /* Another thread may take the descriptor first: then the next pause
     * tries again. */
    w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void on_accept(tl_loop *loop, tl_listener *l, int fd) {
    struct worker *w = l->data;
    (void)loop;
    if (fd >= 0) {
        int r = conn_open(w, fd);
        if (r < 0) {
            fprintf(stderr, "http_hello: connection setup: %s\n", tl_strerror(r));
            close(fd);
        }
        return;
    }
    /* The loop has paused accepting (it goes on after 50 ms, or sooner when
     * one of its streams closes). */
    w->accept_pauses++;
    if (fd == -EMFILE || fd == -ENFILE)
        accept_shed(w);
    else
        fprintf(stderr, "http_hello: accept: %s\n", tl_strerror(fd));
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                  */
/* ------------------------------------------------------------------------ */

/* Stops every handle of the worker and closes every connection; once the
 * close callbacks have run, the loop has nothing left and tl_loop_run
 * returns. */
static void worker_close_all(struct worker *w) {
    tl_listener_stop(w->loop, &w->listener);
    tl_async_stop(w->loop, &w->stop);
    while (w->conns) conn_close(w->conns);
}

static void worker_on_stop(tl_loop *loop, tl_async *a) {
    (void)loop;
    worker_close_all(a->data);
}

static int worker_setup(struct worker *w) {
    int r = tl_loop_new(&w->loop, &w->server->cfg.loop_options);
    if (r < 0) {
        w->loop = NULL;
        report_loop_new_error("http_hello", r, w->server->cfg.loop_options.timers);
        return r;
    }
    if ((r = tl_async_start(w->loop, &w->stop, worker_on_stop, w)) < 0 ||
        (r = tl_listener_start(w->loop, &w->listener, w->listen_fd, on_accept, w)) < 0) {
        fprintf(stderr, "http_hello: worker setup: %s\n", tl_strerror(r));
        return r;
    }
    return 0;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct server *s = w->server;
    w->setup_err = worker_setup(w);
    pthread_barrier_wait(&s->ready);
    if (w->setup_err == 0) {
        int r = tl_loop_run(w->loop, TL_RUN_DEFAULT);
        if (r < 0) {
            /* The kernel's wait failed: nothing sensible is left to do, and
             * tearing down here would race with the main thread's stop send. */
            fprintf(stderr, "http_hello: tl_loop_run: %s\n", tl_strerror(r));
            exit(1);
        }
    }
    if (w->loop) {
        /* After a failed setup: whatever was started. Then the close
         * callbacks of the connections, if any are still due. */
        worker_close_all(w);
        tl_loop_run(w->loop, TL_RUN_DEFAULT);
        tl_loop_stats_get(w->loop, &w->stats);
        tl_loop_lateness(w->loop, &w->lateness, 0);
        int r = tl_loop_free(w->loop);
        if (r < 0) {
            fprintf(stderr, "http_hello: tl_loop_free: %s\n", tl_strerror(r));
            w->exit_err = r; /* reported as a failure by the main thread */
        }
        w->loop = NULL;
    }
    /* The last thing this thread does: the main loop joins it once every
     * worker got here, so the send below has returned before worker_exit is
     * stopped. */
    atomic_fetch_add(&s->finished, 1);
    tl_async_send(&s->worker_exit);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Main thread                                                              */
/* ------------------------------------------------------------------------ */

static void server_request_stop(struct server *s) {
    if (s->stopping) return;
    s->stopping = 1;
    for (int i = 0; i < s->started; i++)
        if (s->workers[i].setup_err == 0) tl_async_send(&s->workers[i].stop);
}

static void on_signal(tl_loop *loop, tl_signal *sig, int signo) {
    (void)loop;
    printf("http_hello: %s, stopping\n", signo == SIGINT ? "SIGINT" : "SIGTERM");
    server_request_stop(sig->data);
}

static void on_worker_exit(tl_loop *loop, tl_async *a) {
    struct server *s = a->data;
    /* A worker finishes only when told to (or when its setup failed, which
     * the main thread has seen), so this waits for the last one. */
    if (atomic_load(&s->finished) < s->started) return;
    /* Every worker has reached its final tl_async_send; joining waits for
     * those calls to return, which takes microseconds. */
    for (int i = 0; i < s->started; i++) pthread_join(s->workers[i].thread, NULL);
    s->started = 0;
    tl_async_stop(loop, &s->worker_exit);
    tl_signal_stop(loop, &s->sigint);
    tl_signal_stop(loop, &s->sigterm);
}

/* A socket of cfg's family bound to cfg's address and *port, with
 * SO_REUSEADDR, SO_REUSEPORT if reuseport, IPv6 only for an IPv6 address;
 * listening if listening. *port becomes the bound port. Returns the fd or a
 * negative errno. */
static int bound_socket(const struct config *cfg, int *port, int reuseport, int listening) {
    struct sockaddr_storage sa = cfg->addr;
    int family = sa.ss_family;
    socklen_t len;
    if (family == AF_INET6) {
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)*port);
        len = sizeof(struct sockaddr_in6);
    } else {
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)*port);
        len = sizeof(struct sockaddr_in);
    }
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    /* An IPv6 address means IPv6 only (:: does not also take IPv4). */
    if ((family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
        bind(fd, (struct sockaddr *)&sa, len) < 0 || (listening && listen(fd, 1024) < 0) ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                     : ((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

/* Opens a non-blocking listening socket; every worker gets its own one on the
 * same port (SO_REUSEPORT) and the kernel balances connections between them. */
static int listen_socket(const struct config *cfg, int *port) {
    return bound_socket(cfg, port, 1, 1);
}

/* SO_REUSEPORT lets any socket that sets it join a port, so a second server
 * started on a port that is in use would silently take part of its
 * connections. Unless --reuseport asks for that, this probe, bound without
 * SO_REUSEPORT, claims the port first: its bind fails with EADDRINUSE while
 * any other socket listens there. It also picks the port for --port 0, and
 * stays bound until the workers listen (it does not listen itself, so they
 * can join it). Returns the fd or a negative errno. */
static int port_probe(const struct config *cfg, int *port) {
    return bound_socket(cfg, port, 0, 0);
}

/* Parses an IPv4 or IPv6 address (e.g. 127.0.0.1, ::1, ::) into *out. */
static int parse_addr(const char *s, struct sockaddr_storage *out) {
    memset(out, 0, sizeof *out);
    struct sockaddr_in *in4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, s, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        return 0;
    }
    return -1;
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--port N] [--bind ADDR] [--threads N] [--idle-ms N] [--header-ms N]\n"
            "          [--io epoll|io_uring|auto] [--timers NAME] [--reuseport] [--help]\n"
            "A keep-alive HTTP/1.1 server answering GET / (tickloop %s).\n"
            "  --port N       TCP port, 0 picks a free one (default 8080)\n"
            "  --bind ADDR    IPv4 or IPv6 address to listen on (default 127.0.0.1;\n"
            "                 ::1 or :: for IPv6)\n"
            "  --threads N    worker threads, one loop each (default: online CPUs)\n"
            "  --idle-ms N    close a connection with no request for N ms (default 5000)\n"
            "  --header-ms N  close a connection whose request header takes longer\n"
            "                 than N ms to arrive (default 2000)\n"
            "  --io KIND      I/O backend (default auto)\n"
            "  --timers NAME  timer backend: heap2, heap4, wheel, hwheel, ... (default:\n"
            "                 TICKLOOP_TIMERS, else the library's)\n"
            "  --reuseport    share the port with other processes listening on it with\n"
            "                 SO_REUSEPORT (by default a port in use is refused)\n",
            argv0, tl_version());
}

static int parse_number(const char *s, unsigned long long min, unsigned long long max,
                        unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

/* Fills cfg from the command line; returns -1 on an unknown option or a bad value. */
static int parse_args(int argc, char **argv, struct config *cfg) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->port = 8080;
    cfg->threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    cfg->idle_ns = 5000 * MS;
    cfg->header_ns = 2000 * MS;
    parse_addr("127.0.0.1", &cfg->addr);
    tl_loop_options_init(&cfg->loop_options);
    cfg->loop_options.read_buffer_size = READ_BUF;
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1]; /* argv[argc] is NULL */
        unsigned long long v;
        if (strcmp(opt, "--help") == 0) {
            usage(stdout, argv[0]);
            exit(0);
        }
        if (strcmp(opt, "--reuseport") == 0) { /* the one option without a value */
            cfg->reuseport = 1;
            i--;
            continue;
        }
        static const char *const known[] = {"--port", "--threads", "--idle-ms", "--header-ms",
                                            "--bind", "--io",      "--timers"};
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strcmp(opt, known[k]) == 0) is_known = 1;
        if (!is_known) {
            fprintf(stderr, "%s: unknown option: %s\n", argv[0], opt);
            return -1;
        }
        if (!val) {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], opt);
            return -1;
        }
        if (strcmp(opt, "--port") == 0 && parse_number(val, 0, 65535, &v) == 0) {
            cfg->port = (int)v;
        } else if (strcmp(opt, "--threads") == 0 && parse_number(val, 1, MAX_THREADS, &v) == 0) {
            cfg->threads = (int)v;
        } else if (strcmp(opt, "--idle-ms") == 0 && parse_number(val, 1, UINT32_MAX, &v) == 0) {
            cfg->idle_ns = v * MS;
        } else if (strcmp(opt, "--header-ms") == 0 && parse_number(val, 1, UINT32_MAX, &v) == 0) {
            cfg->header_ns = v * MS;
        } else if (strcmp(opt, "--bind") == 0 && parse_addr(val, &cfg->addr) == 0) {
            /* stored by parse_addr */
        } else if (strcmp(opt, "--io") == 0 && strcmp(val, "epoll") == 0) {
            cfg->loop_options.io = TL_IO_EPOLL;
        } else if (strcmp(opt, "--io") == 0 && strcmp(val, "io_uring") == 0) {
            cfg->loop_options.io = TL_IO_URING;
        } else if (strcmp(opt, "--io") == 0 && strcmp(val, "auto") == 0) {
            cfg->loop_options.io = TL_IO_AUTO;
        } else if (strcmp(opt, "--timers") == 0) {
            cfg->loop_options.timers = val; /* an unknown name: loop_new_error.h says so */
        } else {
            fprintf(stderr, "%s: bad value for %s: %s\n", argv[0], opt, val);
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    struct server s;
    memset(&s, 0, sizeof s);
    if (parse_args(argc, argv, &s.cfg) < 0) {
        usage(stderr, argv[0]);
        return 2;
    }

    /* Blocked here, before any thread exists, SIGINT and SIGTERM stay blocked
     * in every worker (threads inherit the mask), so only the main loop's
     * signalfd receives them. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);

    int r = tl_loop_new(&s.loop, &s.cfg.loop_options);
    if (r < 0) {
        report_loop_new_error("http_hello", r, s.cfg.loop_options.timers);
        return 1;
    }
    if ((r = tl_signal_start(s.loop, &s.sigint, SIGINT, on_signal, &s)) < 0 ||
        (r = tl_signal_start(s.loop, &s.sigterm, SIGTERM, on_signal, &s)) < 0 ||
        (r = tl_async_start(s.loop, &s.worker_exit, on_worker_exit, &s)) < 0) {
        fprintf(stderr, "http_hello: main loop setup: %s\n", tl_strerror(r));
        return 1;
    }

    s.workers = calloc((size_t)s.cfg.threads, sizeof *s.workers);
    if (!s.workers) return 1;
    int port = s.cfg.port;
    int probe = -1;
    if (!s.cfg.reuseport && (probe = port_probe(&s.cfg, &port)) < 0) {
        if (probe == -EADDRINUSE)
            fprintf(stderr,
                    "http_hello: port %d is already in use (another server listens on it); "
                    "choose another --port, or pass --reuseport to share it with processes "
                    "that listen with SO_REUSEPORT\n",
                    port);
        else
            fprintf(stderr, "http_hello: port %d: %s\n", port, strerror(-probe));
        return 1;
    }
    for (int i = 0; i < s.cfg.threads; i++) {
        struct worker *w = &s.workers[i];
        w->index = i;
        w->server = &s;
        w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* The first socket may let the kernel choose the port; the others
         * then join that one. */
        w->listen_fd = listen_socket(&s.cfg, &port);
        if (w->listen_fd < 0) {
            fprintf(stderr, "http_hello: listen on port %d: %s\n", port, strerror(-w->listen_fd));
            return 1;
        }
    }
    if (probe >= 0) close(probe); /* the workers listen: the port is taken */

    pthread_barrier_init(&s.ready, NULL, (unsigned)s.cfg.threads + 1);
    for (int i = 0; i < s.cfg.threads; i++) {
        if ((r = pthread_create(&s.workers[i].thread, NULL, worker_main, &s.workers[i])) != 0) {
            fprintf(stderr, "http_hello: pthread_create: %s\n", strerror(r));
            return 1;
        }
        s.started++;
    }
    pthread_barrier_wait(&s.ready);
    for (int i = 0; i < s.started; i++) {
        if (s.workers[i].setup_err < 0) s.exit_code = 1;
    }
    if (s.exit_code) {
        server_request_stop(&s);
    } else {
        char addr[INET6_ADDRSTRLEN + 2];
        if (s.cfg.addr.ss_family == AF_INET6) {
            addr[0] = '[';
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&s.cfg.addr)->sin6_addr, addr + 1,
                      INET6_ADDRSTRLEN);
            strcat(addr, "]");
        } else {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&s.cfg.addr)->sin_addr, addr, sizeof addr);
        }
        printf("listening on %s:%d threads=%d io=%s timers=%s idle-ms=%llu header-ms=%llu "
               "streams=%s\n",
               addr, port, s.cfg.threads, tl_loop_io_name(s.loop), tl_loop_timers_name(s.loop),
               (unsigned long long)(s.cfg.idle_ns / MS), (unsigned long long)(s.cfg.header_ns / MS),
               tl_loop_stream_path(s.loop));
        fflush(stdout);
    }

    /* Runs until every worker has finished and been joined. */
    r = tl_loop_run(s.loop, TL_RUN_DEFAULT);
    if (r < 0) {
        fprintf(stderr, "http_hello: tl_loop_run: %s\n", tl_strerror(r));
        return 1;
    }

    uint64_t connections = 0, requests = 0;
    for (int i = 0; i < s.cfg.threads; i++) {
        struct worker *w = &s.workers[i];
        printf("worker %d: connections %llu (idle-closed %llu, header-timeout %llu, shed %llu, "
               "accept pauses %llu) requests %llu | loop: iterations %llu, empty wakeups %llu, "
               "timers fired %llu, io events %llu, stream reads %llu, writes %llu, buffer ring "
               "exhausted %llu\n",
               i, (unsigned long long)w->accepted, (unsigned long long)w->idle_closed,
               (unsigned long long)w->header_closed, (unsigned long long)w->shed,
               (unsigned long long)w->accept_pauses, (unsigned long long)w->requests,
               (unsigned long long)w->stats.iterations, (unsigned long long)w->stats.empty_wakeups,
               (unsigned long long)w->stats.timers_fired, (unsigned long long)w->stats.io_events,
               (unsigned long long)w->stats.stream_reads,
               (unsigned long long)w->stats.stream_writes,
               (unsigned long long)w->stats.buffer_ring_exhausted);
        /* The loop's own view of its timers: wake-up time minus deadline. */
        printf("worker %d: timer lateness (us, as the loop saw it): %llu fired, p50 %.1f, p90 "
               "%.1f, p99 %.1f, p99.9 %.1f, max %.1f; timer wake-ups %llu (up to %llu timers "
               "each)\n",
               i, (unsigned long long)w->lateness.count, w->lateness.p50_ns / 1e3,
               w->lateness.p90_ns / 1e3, w->lateness.p99_ns / 1e3, w->lateness.p999_ns / 1e3,
               w->lateness.max_ns / 1e3, (unsigned long long)w->stats.timer_wakeups,
               (unsigned long long)w->stats.max_timers_per_wakeup);
        connections += w->accepted;
        requests += w->requests;
        if (w->setup_err < 0 || w->exit_err < 0) s.exit_code = 1;
        close(w->listen_fd);
        if (w->spare_fd >= 0) close(w->spare_fd);
    }
    printf("total: connections %llu, requests %llu\n", (unsigned long long)connections,
           (unsigned long long)requests);
    if ((r = tl_loop_free(s.loop)) < 0) {
        fprintf(stderr, "http_hello: tl_loop_free: %s\n", tl_strerror(r));
        s.exit_code = 1;
    }
    pthread_barrier_destroy(&s.ready);
    free(s.workers);
    return s.exit_code;
}
