/* SPDX-License-Identifier: MIT */
/*
 * http_conn.c: the connections of the http_hello example (http_hello.c says
 * what it shows): reading requests, answering them in order with one write
 * per batch, the idle and header timers, and accepting without spinning
 * when descriptors run out.
 */
#define _GNU_SOURCE /* accept4, SO_REUSEPORT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "http_hello.h"

static const char HELLO_BODY[] = "Hello, World!\n";

/* The answer to nearly every request, formatted once: snprintf per response
 * cost more than the rest of the request's handling together. It must stay
 * byte-for-byte what conn_respond() would write for "200 OK" + HELLO_BODY. */
static const char HELLO_RESPONSE[] = "HTTP/1.1 200 OK\r\nServer: tickloop\r\n"
                                     "Content-Type: text/plain\r\nContent-Length: 14\r\n\r\n"
                                     "Hello, World!\n";

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

static void conn_on_closed(tl_loop *loop, tl_stream *s) {
    (void)loop;
    free(s->data);
}

/* Stops c's timers and closes its stream; the loop closes the socket,
 * cancels a queued write and then calls conn_on_closed, which frees c. */
void conn_close(struct conn *c) {
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

void on_accept(tl_loop *loop, tl_listener *l, int fd) {
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
