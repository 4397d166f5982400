/* SPDX-License-Identifier: MIT */
/* conn_common.c: see conn_common.h. */
#define _GNU_SOURCE /* SO_REUSEPORT */
#include "conn_common.h"
#include "io_batch_flag.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct cb_stats cb_stats;
struct cb_config cb_config;

void cb_hist_add(struct cb_hist *h, uint64_t v) {
    unsigned idx;
    if (v < 8) {
        idx = (unsigned)v;
    } else {
        unsigned e = 63u - (unsigned)__builtin_clzll(v); /* v in [2^e, 2^(e+1)) */
        idx = (e - 2) * 8 + (unsigned)((v >> (e - 3)) & 7);
    }
    if (idx >= CB_HIST_BUCKETS) idx = CB_HIST_BUCKETS - 1;
    h->bucket[idx]++;
    h->count++;
    if (v > h->max) h->max = v;
}

uint64_t cb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(const char *argv0, int opts) {
    fprintf(stderr,
            "usage: %s [--port N] [--timeout-ms N] [--scale X] [--leeway-ms N]%s%s\n"
            "  --timeout-ms N  idle timeout before --scale (default 60000)\n"
            "  --scale X       multiplies the timeout (default 1)\n",
            argv0, opts & CB_OPT_LOOP ? " [--io epoll|io_uring] [--timers NAME]" : "",
            opts & CB_OPT_BATCH ? " [--io-batch off|adaptive:US|fixed:US] [--io-batch-us N]" : "");
    exit(2);
}

void cb_parse_args(int argc, char **argv, int opts) {
    double timeout_ms = 60000, scale = 1, leeway_ms = 0;
    cb_config.io = "epoll";
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val) usage(argv[0], opts);
        if (strcmp(opt, "--port") == 0)
            cb_config.port = atoi(val);
        else if (strcmp(opt, "--timeout-ms") == 0)
            timeout_ms = atof(val);
        else if (strcmp(opt, "--scale") == 0)
            scale = atof(val);
        else if (strcmp(opt, "--leeway-ms") == 0)
            leeway_ms = atof(val);
        else if ((opts & CB_OPT_LOOP) && strcmp(opt, "--io") == 0)
            cb_config.io = val;
        else if ((opts & CB_OPT_LOOP) && strcmp(opt, "--timers") == 0)
            cb_config.timers = val;
        else if ((opts & CB_OPT_BATCH) && strcmp(opt, "--io-batch") == 0) {
            int adaptive;
            if (bench_parse_io_batch(val, &cb_config.io_batch_ns, &adaptive) < 0)
                usage(argv[0], opts);
            cb_config.io_batch_adaptive = (uint32_t)adaptive;
        } else if ((opts & CB_OPT_BATCH) && strcmp(opt, "--io-batch-us") == 0) {
            cb_config.io_batch_ns = (uint64_t)(atof(val) * 1e3);
            cb_config.io_batch_adaptive = 0;
        } else
            usage(argv[0], opts);
    }
    if (timeout_ms <= 0 || scale <= 0 || leeway_ms < 0) usage(argv[0], opts);
    cb_config.timeout_ns = (uint64_t)(timeout_ms * scale * 1e6);
    cb_config.leeway_ns = (uint64_t)(leeway_ms * 1e6);
}

int cb_listen(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        perror("socket");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* The kernel caps the backlog at net.core.somaxconn. */
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 65535) < 0) {
        perror("bind/listen");
        exit(1);
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    printf("listening on %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    return fd;
}

int cb_tcp_pair(int fds[2]) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int err = 0;
    fds[0] = fds[1] = -1;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return -errno;
    if (bind(lfd, (struct sockaddr *)&sa, len) < 0 || listen(lfd, 1) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &len) < 0 ||
        (fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        connect(fds[0], (struct sockaddr *)&sa, len) < 0 ||
        (fds[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
        err = -errno;
    close(lfd);
    if (err) {
        if (fds[0] >= 0) close(fds[0]);
        fds[0] = fds[1] = -1;
    }
    return err;
}

void cb_account_read(uint8_t *off, const void *buf, size_t n) {
    cb_stats.reads++;
    cb_stats.bytes += n;
    unsigned end = (unsigned)((*off + n) & 7);
    if (end == 0 && n >= 8) {
        uint64_t sent;
        memcpy(&sent, (const char *)buf + n - 8, 8);
        uint64_t now = cb_now_ns();
        cb_hist_add(&cb_stats.restart, now >= sent ? now - sent : 0);
    }
    *off = (uint8_t)end;
}

void cb_account_idle(uint64_t deadline_ns) {
    uint64_t now = cb_now_ns();
    cb_stats.idle_closed++;
    if (now < deadline_ns)
        cb_stats.idle_early++;
    else
        cb_hist_add(&cb_stats.idle, now - deadline_ns);
}

static void print_hist(const char *key, const struct cb_hist *h) {
    printf(" %s=%llu/%llu/", key, (unsigned long long)h->count, (unsigned long long)h->max);
    int first = 1;
    for (unsigned i = 0; i < CB_HIST_BUCKETS; i++) {
        if (!h->bucket[i]) continue;
        printf("%s%u:%llu", first ? "" : ",", i, (unsigned long long)h->bucket[i]);
        first = 0;
    }
}

void cb_print_stats(const char *name, const char *extra) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long rss_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%*s %ld", &rss_pages) != 1) rss_pages = 0;
        fclose(f);
    }
    const struct cb_stats *s = &cb_stats;
    printf("stats server=%s pid=%d accepted=%llu open=%llu reads=%llu heartbeats=%llu "
           "idle_closed=%llu idle_early=%llu peer_closed=%llu errors=%llu accept_errors=%llu "
           "utime_us=%lld stime_us=%lld nvcsw=%ld nivcsw=%ld rss_kb=%ld",
           name, (int)getpid(), (unsigned long long)s->accepted, (unsigned long long)s->open,
           (unsigned long long)s->reads, (unsigned long long)(s->bytes / 8),
           (unsigned long long)s->idle_closed, (unsigned long long)s->idle_early,
           (unsigned long long)s->peer_closed, (unsigned long long)s->errors,
           (unsigned long long)s->accept_errors,
           (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
           (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_nvcsw, ru.ru_nivcsw,
           rss_pages * (sysconf(_SC_PAGESIZE) / 1024));
    print_hist("restart_hist", &s->restart);
    print_hist("idle_hist", &s->idle);
    if (extra) printf(" %s", extra);
    printf("\n");
    fflush(stdout);
}
