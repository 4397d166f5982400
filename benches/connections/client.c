/* SPDX-License-Identifier: MIT */
/*
 * client.c: the heartbeating-connections benchmark's client (plain epoll, no
 * event library, the same for every server).
 *
 *   conn-client --port P --count N [--index I] [--interval-ms 30000]
 *               [--timeout-ms 60000] [--scale X] [--silent-every 100]
 *               [--silent-after 2] [--inflight 256] [--pause-at M]
 *               [--window-ms W]
 *
 * Opens N connections to 127.0.0.1:P, each from its own source address
 * range in 127.0.0.0/8 (bind() before connect(), with
 * IP_BIND_ADDRESS_NO_PORT so that the port is chosen per 4-tuple): client I
 * uses 127.(I+1).x.y, a new address every 1000 connections, so one client
 * is never short of ephemeral ports. At most --inflight connects are
 * pending at once (the servers' accept queues stay short).
 *
 * Every connection sends an 8-byte heartbeat (its CLOCK_MONOTONIC send time
 * in ns) when connected and then every interval (both times --scale). One
 * connection in --silent-every goes silent after --silent-after heartbeats;
 * the server must close exactly those, each one timeout after its last
 * heartbeat: a close seen within [timeout - 5 ms, timeout + W] counts as on
 * time (W, --window-ms, the allowance for the server's tick, leeway and this
 * client's own delay in seeing the close; default 100 ms). Any other close
 * is counted as wrong.
 *
 * With --pause-at M it stops after M connections and prints "paused", and
 * goes on when sent SIGUSR2 (run.py measures memory at both points). It
 * prints "connected-all" when all N are connected, a "cstats" line on
 * SIGUSR1, and a last one on SIGTERM before it exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

enum { ST_IDLE = 0, ST_CONNECTING, ST_OPEN, ST_CLOSED };

struct cconn {
    int fd;
    uint8_t state;
    uint8_t silent;
    uint16_t beats;     /* heartbeats sent, saturating */
    uint64_t next_due;  /* next heartbeat, CLOCK_MONOTONIC ns */
    uint64_t last_send; /* last heartbeat sent */
};

static struct {
    int port, index, count, inflight_max, pause_at, silent_every, silent_after;
    uint64_t interval_ns, timeout_ns, window_ns;
} cfg = {.count = 0,
         .inflight_max = 256,
         .silent_every = 100,
         .silent_after = 2,
         .interval_ns = 30000 * 1000000ull,
         .timeout_ns = 60000 * 1000000ull,
         .window_ns = 100 * 1000000ull};

static struct cconn *conns;
static uint32_t *ring; /* connections in heartbeat order (a FIFO: one period for all) */
static size_t ring_head, ring_len;
static int epfd;

static struct {
    uint64_t connected, connect_failed, open, sent, send_errors, silent, silent_ok, silent_early,
        silent_late, wrong_closed;
    int64_t close_min_ns, close_max_ns; /* silent close time - last heartbeat - timeout */
} st = {.close_min_ns = INT64_MAX, .close_max_ns = INT64_MIN};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "conn-client %d: %s: %s\n", cfg.index, what, strerror(errno));
    exit(1);
}

static void ring_push(uint32_t i) {
    ring[(ring_head + ring_len) % (size_t)cfg.count] = i;
    ring_len++;
}

/* Sends connection i's heartbeat and schedules the next one, unless it is
 * one of the silent connections and has sent its share. */
static void heartbeat(uint32_t i, uint64_t now) {
    struct cconn *c = &conns[i];
    uint64_t t = now_ns();
    ssize_t n = send(c->fd, &t, sizeof t, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != (ssize_t)sizeof t) {
        st.send_errors++;
        return; /* the close shows up as EOF or an error on read */
    }
    st.sent++;
    c->last_send = t;
    if (c->beats < UINT16_MAX) c->beats++;
    if (c->silent && c->beats >= cfg.silent_after) return;
    c->next_due = (c->next_due ? c->next_due : now) + cfg.interval_ns;
    ring_push(i);
}

static void on_closed(uint32_t i) {
    struct cconn *c = &conns[i];
    uint64_t now = now_ns();
    if (c->silent && c->beats >= cfg.silent_after) {
        int64_t d = (int64_t)(now - c->last_send) - (int64_t)cfg.timeout_ns;
        if (d < st.close_min_ns) st.close_min_ns = d;
        if (d > st.close_max_ns) st.close_max_ns = d;
        if (d < -5 * 1000000ll)
            st.silent_early++;
        else if (d > (int64_t)cfg.window_ns)
            st.silent_late++;
        else
            st.silent_ok++;
    } else {
        st.wrong_closed++;
    }
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->state = ST_CLOSED;
    st.open--;
}

static void start_connect(uint32_t i) {
    struct cconn *c = &conns[i];
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) die("socket");
    int one = 1;
    setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    uint32_t k = i / 1000 + 1;
    struct sockaddr_in src = {.sin_family = AF_INET};
    src.sin_addr.s_addr =
        htonl((127u << 24) | ((uint32_t)(cfg.index + 1) << 16) | ((k >> 8) & 255) << 8 | (k & 255));
    if (bind(c->fd, (struct sockaddr *)&src, sizeof src) < 0) die("bind");
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg.port)};
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS)
        die("connect");
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = i};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    c->state = ST_CONNECTING;
    c->silent =
        cfg.silent_every > 0 && i % (uint32_t)cfg.silent_every == (uint32_t)cfg.silent_every / 2;
}

static void print_stats(void) {
    uint64_t now = now_ns(), overdue = 0;
    for (int i = 0; i < cfg.count; i++) {
        const struct cconn *c = &conns[i];
        if (c->state == ST_OPEN && c->silent && c->beats >= cfg.silent_after &&
            now > c->last_send + cfg.timeout_ns + cfg.window_ns)
            overdue++;
    }
    printf("cstats index=%d connected=%llu connect_failed=%llu open=%llu sent=%llu "
           "send_errors=%llu silent=%llu silent_ok=%llu silent_early=%llu silent_late=%llu "
           "silent_overdue=%llu wrong_closed=%llu close_min_us=%lld close_max_us=%lld\n",
           cfg.index, (unsigned long long)st.connected, (unsigned long long)st.connect_failed,
           (unsigned long long)st.open, (unsigned long long)st.sent,
           (unsigned long long)st.send_errors, (unsigned long long)st.silent,
           (unsigned long long)st.silent_ok, (unsigned long long)st.silent_early,
           (unsigned long long)st.silent_late, (unsigned long long)overdue,
           (unsigned long long)st.wrong_closed,
           st.close_min_ns == INT64_MAX ? 0 : (long long)(st.close_min_ns / 1000),
           st.close_max_ns == INT64_MIN ? 0 : (long long)(st.close_max_ns / 1000));
    fflush(stdout);
}

static uint64_t parse_ms(const char *v, double scale) {
    return (uint64_t)(atof(v) * scale * 1e6);
}

/* Reads the command line into cfg; returns -1 to go on, else the exit
 * status (2 on a usage error). */
static int parse_args(int argc, char **argv) {
    double scale = 1;
    const char *interval = "30000", *timeout = "60000", *window = "100";
    for (int i = 1; i + 1 < argc + 1; i += 2) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "conn-client: %s needs a value\n", o);
            return 2;
        }
        if (strcmp(o, "--port") == 0)
            cfg.port = atoi(v);
        else if (strcmp(o, "--count") == 0)
            cfg.count = atoi(v);
        else if (strcmp(o, "--index") == 0)
            cfg.index = atoi(v);
        else if (strcmp(o, "--interval-ms") == 0)
            interval = v;
        else if (strcmp(o, "--timeout-ms") == 0)
            timeout = v;
        else if (strcmp(o, "--scale") == 0)
            scale = atof(v);
        else if (strcmp(o, "--silent-every") == 0)
            cfg.silent_every = atoi(v);
        else if (strcmp(o, "--silent-after") == 0)
            cfg.silent_after = atoi(v);
        else if (strcmp(o, "--inflight") == 0)
            cfg.inflight_max = atoi(v);
        else if (strcmp(o, "--pause-at") == 0)
            cfg.pause_at = atoi(v);
        else if (strcmp(o, "--window-ms") == 0)
            window = v;
        else {
            fprintf(stderr, "conn-client: unknown option %s (see the top of client.c)\n", o);
            return 2;
        }
    }
    if (cfg.port <= 0 || cfg.count <= 0 || cfg.index < 0 || cfg.index > 254 ||
        cfg.inflight_max <= 0 || cfg.silent_after < 1 || scale <= 0) {
        fprintf(stderr, "conn-client: need --port, --count > 0, --index in [0, 254]\n");
        return 2;
    }
    cfg.interval_ns = parse_ms(interval, scale);
    cfg.timeout_ns = parse_ms(timeout, scale);
    cfg.window_ns = parse_ms(window, 1);
    return -1;
}

/* The epoll set, and a signalfd in it (data UINT64_MAX) for SIGUSR1 (print
 * the stats), SIGUSR2 (resume after --pause-at), SIGTERM and SIGINT (print
 * and exit). Returns the signalfd. */
static int setup_epoll(void) {
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1");
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    sigaddset(&mask, SIGUSR2);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) die("signalfd");
    struct epoll_event sev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
    epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &sev);

    return sfd;
}

/* The connecting phase: connections started (next) and still connecting
 * (inflight), up to limit (--pause-at, then all once SIGUSR2 resumes), and
 * the limit last announced on stdout. */
struct progress {
    uint64_t t0;
    int next, inflight, paused, announced, limit;
};

/* Reads the pending signals; returns 1 if the client is to exit. */
static int on_signals(int sfd, struct progress *p) {
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGUSR2 && p->paused) {
            p->paused = 0;
            p->limit = cfg.count;
            p->t0 = now_ns();
        } else if (si.ssi_signo == SIGUSR1) {
            print_stats();
        } else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            print_stats();
            return 1;
        }
    }
    return 0;
}

/* An event of connection i: its connect finished, or it is readable (the
 * server closed it). */
static void on_conn_event(uint64_t i, uint64_t now, struct progress *p) {
    struct cconn *c = &conns[i];
    if (c->state == ST_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        p->inflight--;
        if (err) {
            st.connect_failed++;
            epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            c->state = ST_CLOSED;
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u64 = i};
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        c->state = ST_OPEN;
        st.connected++;
        st.open++;
        heartbeat((uint32_t)i, now);
    } else if (c->state == ST_OPEN) {
        char buf[64];
        ssize_t r = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r <= 0 && !(r < 0 && (errno == EAGAIN || errno == EINTR))) on_closed((uint32_t)i);
    }
}

/* Starts connections up to the limit, and says so once all have been tried. */
static void connect_more(struct progress *p) {
    while (!p->paused && p->next < p->limit && p->inflight < cfg.inflight_max) {
        start_connect((uint32_t)p->next++);
        p->inflight++;
    }
    if (p->announced != p->limit && p->next == p->limit && p->inflight == 0) {
        printf("%s index=%d connected=%llu failed=%llu ms=%.1f\n",
               p->limit == cfg.count ? "connected-all" : "paused", cfg.index,
               (unsigned long long)st.connected, (unsigned long long)st.connect_failed,
               (now_ns() - p->t0) / 1e6);
        fflush(stdout);
        p->announced = p->limit;
        if (p->limit < cfg.count) p->paused = 1;
    }
}

int main(int argc, char **argv) {
    int status = parse_args(argc, argv);
    if (status >= 0) return status;
    conns = calloc((size_t)cfg.count, sizeof *conns);
    ring = calloc((size_t)cfg.count, sizeof *ring);
    if (!conns || !ring) die("calloc");
    for (int i = 0; i < cfg.count; i++)
        if (i % (cfg.silent_every > 0 ? cfg.silent_every : cfg.count + 1) == cfg.silent_every / 2)
            st.silent++;

    int sfd = setup_epoll();

    struct progress p = {.t0 = now_ns(), .announced = -1}; /* the limit last announced */
    p.limit = cfg.pause_at > 0 && cfg.pause_at < cfg.count ? cfg.pause_at : cfg.count;
    enum { MAXEV = 512 };
    static struct epoll_event evs[MAXEV];
    for (;;) {
        connect_more(&p);
        uint64_t now = now_ns();
        int wait_ms = -1;
        if (ring_len) {
            uint64_t due = conns[ring[ring_head]].next_due;
            wait_ms = due <= now ? 0 : (int)((due - now + 999999) / 1000000);
        }
        if (!p.paused && p.next < p.limit && p.inflight < cfg.inflight_max) wait_ms = 0;
        int n = epoll_wait(epfd, evs, MAXEV, wait_ms);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        now = now_ns();
        for (int e = 0; e < n; e++) {
            if (evs[e].data.u64 != UINT64_MAX)
                on_conn_event(evs[e].data.u64, now, &p);
            else if (on_signals(sfd, &p))
                return 0;
        }
        /* Heartbeats due by now, in schedule order. */
        while (ring_len && conns[ring[ring_head]].next_due <= now) {
            uint32_t i = ring[ring_head];
            ring_head = (ring_head + 1) % (size_t)cfg.count;
            ring_len--;
            if (conns[i].state == ST_OPEN) heartbeat(i, now);
        }
    }
}
