/* SPDX-License-Identifier: MIT */
/* http_core.c: see http_core.h. */
#define _GNU_SOURCE /* accept4 */
#include "http_core.h"
#include "io_batch_flag.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static const char RESPONSE_KEEP[] = "HTTP/1.1 200 OK\r\n"
                                    "Content-Type: text/plain\r\n"
                                    "Content-Length: 14\r\n"
                                    "\r\n"
                                    "Hello, World!\n";
static const char RESPONSE_CLOSE[] = "HTTP/1.1 200 OK\r\n"
                                     "Content-Type: text/plain\r\n"
                                     "Content-Length: 14\r\n"
                                     "Connection: close\r\n"
                                     "\r\n"
                                     "Hello, World!\n";

void hb_conn_init(struct hb_conn *c, int fd) {
    c->fd = fd;
    c->peer_closed = c->close_after = 0;
    c->in_len = c->out_off = c->out_len = 0;
}

/* 1 if the header block [p, end) (starting at a CRLF) has a "Connection:"
 * header containing `token` (case-insensitive). Walks lines with memchr and
 * compares only those starting with 'C', as a minimal server would. */
static int connection_has(const char *p, const char *end, const char *token) {
    static const char name[] = "connection:";
    size_t name_len = sizeof name - 1, token_len = strlen(token);
    for (const char *line = p + 2; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol) eol = end;
        if ((*line | 0x20) == 'c' && (size_t)(eol - line) > name_len &&
            strncasecmp(line, name, name_len) == 0) {
            for (const char *v = line + name_len; v + token_len <= eol; v++)
                if (strncasecmp(v, token, token_len) == 0) return 1;
            return 0;
        }
        line = eol + 1;
    }
    return 0;
}

/* The end of a request header: the first CRLFCRLF in [p, p + len), or NULL.
 * memchr for each CR; glibc's generic memmem costs several times more on
 * short requests. */
static char *find_header_end(char *p, size_t len) {
    char *end = p + len;
    while (end - p >= 4) {
        char *cr = memchr(p, '\r', (size_t)(end - p - 3));
        if (!cr) return NULL;
        if (cr[1] == '\n' && cr[2] == '\r' && cr[3] == '\n') return cr;
        p = cr + 1;
    }
    return NULL;
}

int hb_process(struct hb_conn *c) {
    if (c->out_off > 0) { /* keep unsent output at the front */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    size_t off = 0;
    int served = 0;
    while (!c->close_after && HB_OUT_CAP - c->out_len >= sizeof RESPONSE_CLOSE) {
        char *req = c->in + off;
        char *end = find_header_end(req, c->in_len - off);
        if (!end) {
            /* A header that fills the whole buffer is never going to end. */
            if (off == 0 && c->in_len == HB_IN_CAP) c->close_after = 1;
            break;
        }
        const char *eol = (const char *)memchr(req, '\n', (size_t)(end + 2 - req)) - 1; /* the CR */
        int http10 = eol - req >= 8 && memcmp(eol - 8, "HTTP/1.0", 8) == 0;
        if (connection_has(eol, end + 2, "close") ||
            (http10 && !connection_has(eol, end + 2, "keep-alive")))
            c->close_after = 1;
        const char *resp = c->close_after ? RESPONSE_CLOSE : RESPONSE_KEEP;
        size_t len = c->close_after ? sizeof RESPONSE_CLOSE - 1 : sizeof RESPONSE_KEEP - 1;
        memcpy(c->out + c->out_len, resp, len);
        c->out_len += len;
        off = (size_t)(end + 4 - c->in);
        served++;
    }
    if (off > 0) memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return served;
}

int hb_read(struct hb_conn *c) {
    while (c->in_len < HB_IN_CAP) {
        ssize_t n = recv(c->fd, c->in + c->in_len, HB_IN_CAP - c->in_len, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            if (c->in_len < HB_IN_CAP) break; /* short read: the socket is drained */
            continue;
        }
        if (n == 0) {
            c->peer_closed = 1;
            return HB_OK;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return HB_OK;
        return HB_CLOSE;
    }
    return HB_OK;
}

int hb_flush(struct hb_conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return HB_OK;
        } else {
            return HB_CLOSE;
        }
    }
    c->out_off = c->out_len = 0;
    if (c->close_after || (c->peer_closed && c->in_len == 0)) return HB_CLOSE;
    return HB_OK;
}

int hb_want_write(const struct hb_conn *c) {
    return c->out_off < c->out_len;
}

int hb_want_read(const struct hb_conn *c) {
    return !c->peer_closed && !c->close_after && c->in_len < HB_IN_CAP &&
           HB_OUT_CAP - c->out_len >= sizeof RESPONSE_CLOSE;
}

int hb_listen(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("socket");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 4096) < 0) {
        perror("bind/listen");
        exit(1);
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    printf("listening on %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    return fd;
}

int hb_accept(int listen_fd) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

int hb_parse_args_batch(int argc, char **argv, const char *extra, const char **extra_value,
                        struct hb_io_batch *batch) {
    int port = 0;
    if (batch) {
        batch->ns = 0;
        batch->adaptive = 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--port") == 0 && value) {
            port = atoi(value);
            i++;
        } else if (extra && strcmp(argv[i], extra) == 0 && value) {
            *extra_value = value;
            i++;
        } else if (batch && strcmp(argv[i], "--io-batch") == 0 && value &&
                   bench_parse_io_batch(value, &batch->ns, &batch->adaptive) == 0) {
            i++;
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\nusage: %s [--port N]%s%s%s%s\n",
                    argv[0], argv[i], argv[0], extra ? " [" : "", extra ? extra : "",
                    extra ? " VALUE]" : "", batch ? " [--io-batch off|adaptive:US|fixed:US]" : "");
            exit(2);
        }
    }
    return port;
}

int hb_parse_args(int argc, char **argv, const char *extra, const char **extra_value) {
    return hb_parse_args_batch(argc, argv, extra, extra_value, NULL);
}
