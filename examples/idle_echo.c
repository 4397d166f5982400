/* SPDX-License-Identifier: MIT */
/*
 * idle_echo.c: a TCP echo server that closes connections idle for --idle-ms.
 *
 * Shows the other way to keep a per-connection idle timeout, next to the
 * heartbeat of http_hello.c: here reading data only records the time
 * (last_active = tl_now(loop)); the timer is not touched per read. When it
 * fires, the callback compares with last_active and either closes the
 * connection or starts the timer again for the time that is left (libev's
 * documentation calls this the fastest of its idle-timeout patterns). A busy
 * connection then costs one timer operation per idle period instead of one
 * per read, and the deadline is still exact: last_active + idle.
 *
 * Also shows level-triggered echo with back-pressure (a client that does not
 * read its echo is not read from either), pausing accept on a timer when the
 * process is out of descriptors (EMFILE) instead of spinning on a readable
 * listener, and a clean exit on SIGINT/SIGTERM with the loop's statistics.
 *
 *   idle_echo [--port N] [--idle-ms N] [--io epoll|io_uring|auto] [--timers NAME] [--help]
 *
 * Prints "listening on 127.0.0.1:PORT ..." on stdout (--port 0 picks a free
 * port). Try: nc 127.0.0.1 7007
 *
 * The tl_*_stop() calls below are not checked: they fail only on misuse
 * (a NULL handle, or one active on another loop), which this file never does.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "example_options.h"
#include "loop_new_error.h"

#define MS ((uint64_t)1000000)

enum {
    BUF_CAP = 65536,
    ACCEPT_BATCH = 64, /* accepts per callback, so that other watchers get turns */
};

/* How long accepting pauses when accept4 fails for lack of descriptors or
 * memory: the listener stays readable, so retrying at once would spin. */
static const uint64_t ACCEPT_PAUSE_NS = 100 * MS;

struct server;

struct conn {
    tl_io io;
    tl_timer idle;
    uint64_t last_active; /* tl_now() of the last read that returned data */
    struct server *server;
    struct conn *prev, *next;
    int peer_closed;
    size_t off, len; /* pending echo: buf[off, len) */
    char buf[BUF_CAP];
};

struct server {
    tl_loop *loop;
    int listen_fd;
    uint64_t idle_ns;
    tl_io listener;
    tl_timer accept_resume;
    tl_signal sigint, sigterm;
    struct conn *conns;
    uint64_t accepted, idle_closed, bytes_echoed, accept_pauses;
};

static void conn_close(struct conn *c) {
    struct server *s = c->server;
    tl_io_stop(s->loop, &c->io);
    tl_timer_stop(s->loop, &c->idle);
    close(c->io.fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    free(c);
}

static void conn_on_idle(tl_loop *loop, tl_timer *t) {
    struct conn *c = t->data;
    uint64_t deadline = c->last_active + c->server->idle_ns;
    uint64_t now = tl_now(loop);
    if (now < deadline) { /* active since the timer was set: wait for the rest */
        int r = tl_timer_start(loop, t, deadline - now, 0);
        if (r == 0) return;
        fprintf(stderr, "idle_echo: tl_timer_start: %s\n", tl_strerror(r));
    } else {
        c->server->idle_closed++;
    }
    conn_close(c);
}

/* Echoes what is buffered, reads more when the buffer is empty, and watches
 * for what the connection needs next. */
static void conn_on_io(tl_loop *loop, tl_io *io, unsigned revents) {
    struct conn *c = io->data;
    (void)revents;
    /* A client that never stops sending would keep this loop going forever;
     * after a few rounds the others get their turn (level-triggered, so the
     * rest is read next iteration). */
    for (int round = 0; round < 16; round++) {
        while (c->off < c->len) {
            ssize_t n = send(io->fd, c->buf + c->off, c->len - c->off, MSG_NOSIGNAL);
            if (n > 0) {
                c->off += (size_t)n;
                c->server->bytes_echoed += (uint64_t)n;
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                break;
            } else {
                conn_close(c);
                return;
            }
        }
        if (c->off < c->len) break; /* the client is not reading: stop reading too */
        c->off = c->len = 0;
        if (c->peer_closed) {
            conn_close(c);
            return;
        }
        ssize_t n = recv(io->fd, c->buf, BUF_CAP, 0);
        if (n > 0) {
            c->len = (size_t)n;
            c->last_active = tl_now(loop);
            continue; /* echo it right away: usually the socket has room */
        }
        if (n == 0) {
            c->peer_closed = 1;
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        conn_close(c);
        return;
    }
    if (c->peer_closed && c->off == c->len) { /* the last round read EOF */
        conn_close(c);
        return;
    }
    unsigned want = c->off < c->len ? TL_WRITE : TL_READ;
    if (want != io->events) {
        int r = tl_io_start(loop, io, want);
        if (r < 0) {
            fprintf(stderr, "idle_echo: tl_io_start: %s\n", tl_strerror(r));
            conn_close(c);
        }
    }
}

static int conn_open(struct server *s, int fd) {
    struct conn *c = malloc(sizeof *c);
    if (!c) return -ENOMEM;
    c->server = s;
    c->peer_closed = 0;
    c->off = c->len = 0;
    c->last_active = tl_now(s->loop);
    tl_io_init(&c->io, fd, conn_on_io, c);
    tl_timer_init(&c->idle, conn_on_idle, c);
    int r = tl_io_start(s->loop, &c->io, TL_READ);
    if (r == 0) r = tl_timer_start(s->loop, &c->idle, s->idle_ns, 0);
    if (r < 0) {
        tl_io_stop(s->loop, &c->io);
        free(c);
        return r;
    }
    c->prev = NULL;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->accepted++;
    return 0;
}

static void on_accept(tl_loop *loop, tl_io *io, unsigned revents) {
    struct server *s = io->data;
    (void)revents;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            int r = conn_open(s, fd);
            if (r < 0) {
                fprintf(stderr, "idle_echo: connection setup: %s\n", tl_strerror(r));
                close(fd);
            }
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection waits in the
         * backlog until descriptors are freed; stop watching the listener
         * for a while rather than spin on it. */
        if (errno != EMFILE && errno != ENFILE) perror("idle_echo: accept4");
        int r = tl_io_stop(loop, &s->listener);
        if (r == 0) r = tl_timer_start(loop, &s->accept_resume, ACCEPT_PAUSE_NS, 0);
        if (r < 0) fprintf(stderr, "idle_echo: pausing accept: %s\n", tl_strerror(r));
        s->accept_pauses++;
        return;
    }
}

static void on_accept_resume(tl_loop *loop, tl_timer *t) {
    struct server *s = t->data;
    int r = tl_io_start(loop, &s->listener, TL_READ);
    if (r < 0) {
        fprintf(stderr, "idle_echo: resuming accept: %s\n", tl_strerror(r));
        tl_timer_start(loop, t, ACCEPT_PAUSE_NS, 0);
    }
}

/* Stops every handle: the loop then has nothing left and tl_loop_run returns. */
static void on_signal(tl_loop *loop, tl_signal *sig, int signo) {
    struct server *s = sig->data;
    printf("idle_echo: %s, stopping\n", signo == SIGINT ? "SIGINT" : "SIGTERM");
    tl_io_stop(loop, &s->listener);
    tl_timer_stop(loop, &s->accept_resume);
    tl_signal_stop(loop, &s->sigint);
    tl_signal_stop(loop, &s->sigterm);
    while (s->conns) conn_close(s->conns);
}

static int listen_socket(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)*port);
    socklen_t len = sizeof sa;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--port N] [--idle-ms N] [--io epoll|io_uring|auto] [--timers NAME] "
            "[--help]\n"
            "A TCP echo server on 127.0.0.1 with per-connection idle timeouts (tickloop %s).\n"
            "  --port N       TCP port, 0 picks a free one (default 7007)\n"
            "  --idle-ms N    close a connection that sent nothing for N ms (default 10000)\n"
            "  --io KIND      I/O backend (default auto)\n"
            "  --timers NAME  timer backend: heap2, heap4, wheel, hwheel, ... (default:\n"
            "                 TICKLOOP_TIMERS, else the library's)\n",
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

int main(int argc, char **argv) {
    int port = 7007;
    uint64_t idle_ms = 10000;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1]; /* argv[argc] is NULL */
        unsigned long long v;
        if (strcmp(opt, "--help") == 0) {
            usage(stdout, argv[0]);
            return 0;
        } else if (val && strcmp(opt, "--port") == 0 && parse_number(val, 0, 65535, &v) == 0) {
            port = (int)v;
        } else if (val && strcmp(opt, "--idle-ms") == 0 &&
                   parse_number(val, 1, UINT32_MAX, &v) == 0) {
            idle_ms = v;
        } else if (val && strcmp(opt, "--io") == 0 && parse_io_kind(val, &opts.io) == 0) {
            /* parse_io_kind stored the backend */
        } else if (val && strcmp(opt, "--timers") == 0) {
            opts.timers = val; /* an unknown name: loop_new_error.h says so */
        } else {
            static const char *const known[] = {"--port", "--idle-ms", "--io", "--timers"};
            report_bad_option(argv[0], opt, val, known, sizeof known / sizeof known[0]);
            usage(stderr, argv[0]);
            return 2;
        }
    }

    struct server s;
    memset(&s, 0, sizeof s);
    s.idle_ns = idle_ms * MS;
    s.listen_fd = listen_socket(&port);
    if (s.listen_fd < 0) {
        fprintf(stderr, "idle_echo: listen on port %d: %s\n", port, strerror(-s.listen_fd));
        return 1;
    }
    int r = tl_loop_new(&s.loop, &opts);
    if (r < 0) {
        report_loop_new_error("idle_echo", r, opts.timers);
        return 1;
    }
    tl_io_init(&s.listener, s.listen_fd, on_accept, &s);
    tl_timer_init(&s.accept_resume, on_accept_resume, &s);
    if ((r = tl_io_start(s.loop, &s.listener, TL_READ)) < 0 ||
        (r = tl_signal_start(s.loop, &s.sigint, SIGINT, on_signal, &s)) < 0 ||
        (r = tl_signal_start(s.loop, &s.sigterm, SIGTERM, on_signal, &s)) < 0) {
        fprintf(stderr, "idle_echo: setup: %s\n", tl_strerror(r));
        return 1;
    }
    printf("listening on 127.0.0.1:%d io=%s timers=%s idle-ms=%llu\n", port,
           tl_loop_io_name(s.loop), tl_loop_timers_name(s.loop), (unsigned long long)idle_ms);
    fflush(stdout);

    /* Runs until the signal callback has stopped every handle. */
    r = tl_loop_run(s.loop, TL_RUN_DEFAULT);
    if (r < 0) {
        fprintf(stderr, "idle_echo: tl_loop_run: %s\n", tl_strerror(r));
        return 1;
    }
    tl_loop_stats st;
    tl_loop_stats_get(s.loop, &st);
    printf("connections %llu (idle-closed %llu, accept pauses %llu), bytes echoed %llu | loop: "
           "iterations %llu, empty wakeups %llu, timers fired %llu, io events %llu\n",
           (unsigned long long)s.accepted, (unsigned long long)s.idle_closed,
           (unsigned long long)s.accept_pauses, (unsigned long long)s.bytes_echoed,
           (unsigned long long)st.iterations, (unsigned long long)st.empty_wakeups,
           (unsigned long long)st.timers_fired, (unsigned long long)st.io_events);
    close(s.listen_fd);
    if ((r = tl_loop_free(s.loop)) < 0) {
        fprintf(stderr, "idle_echo: tl_loop_free: %s\n", tl_strerror(r));
        return 1;
    }
    return 0;
}
