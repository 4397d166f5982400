/* SPDX-License-Identifier: MIT */
/*
 * Smoke tests of examples/http_hello, run as a user would run it, as a
 * child process, and driven over loopback TCP: keep-alive, pipelined and
 * split requests, HTTP/1.0, IPv6, the idle and header timeouts, and
 * running out of descriptors without spinning. Registered beside
 * examples_smoke.c (examples/meson.build), once per I/O backend.
 */
#define _GNU_SOURCE
#include "examples_helpers.h"

/* ------------------------------------------------------------------------ */
/* http_hello                                                               */
/* ------------------------------------------------------------------------ */

TestSuite(http_hello, .timeout = 120, .fini = kill_current_child);

/* A client that sends many requests before reading any response: the
 * server must stop reading while its output is stuck, and resume the
 * requests it already holds once the client reads. */
static void flood_before_reading(int port) {
    struct http_conn *slow = http_conn_new();
    int small = 4096;
    slow->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(slow->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct timeval tv = {IO_TIMEOUT_MS / 1000, 0};
    setsockopt(slow->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(connect_retrying(slow->fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    enum { MANY = 3000 };
    static const char tiny[] = "GET / HTTP/1.1\r\n\r\n";
    static char flood[MANY * (sizeof tiny - 1) + 1];
    for (int i = 0; i < MANY; i++) memcpy(flood + i * (sizeof tiny - 1), tiny, sizeof tiny);
    send_str(slow->fd, flood);
    sleep_ms(300);
    for (int i = 0; i < MANY; i++) http_expect(slow, 0, 200, HELLO);
    close(slow->fd);
}

/* Many connections at once, on both workers: n requests sent before any
 * answer is read; the connections in fds stay open for the caller. */
static void many_connections_at_once(int port, int *fds, int n) {
    struct http_conn *c = http_conn_new();
    for (int i = 0; i < n; i++) {
        fds[i] = connect_to(port);
        send_str(fds[i], GET);
    }
    for (int i = 0; i < n; i++) {
        c->fd = fds[i];
        c->len = 0;
        http_expect(c, 0, 200, HELLO);
    }
}

Test(http_hello, answers_keepalive_pipelined_and_split_requests) {
    skip_unless_io_available();
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_HTTP_HELLO"),
                    "--port",
                    "0",
                    "--threads",
                    "2",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, 0);
    struct http_conn *c = http_conn_new();
    c->fd = connect_to(port);

    /* Keep-alive: several requests, one connection. */
    for (int i = 0; i < 3; i++) {
        send_str(c->fd, GET);
        http_expect(c, 0, 200, HELLO);
    }
    send_str(c->fd, "GET /missing HTTP/1.1\r\nHost: test\r\n\r\n");
    http_expect(c, 0, 404, NULL);
    send_str(c->fd, "HEAD / HTTP/1.1\r\nHost: test\r\n\r\n");
    http_expect(c, 1, 200, NULL);

    /* Pipelined: many requests in one write, answered in order. */
    char batch[64 * sizeof GET];
    batch[0] = '\0';
    for (int i = 0; i < 50; i++) strcat(batch, i % 10 == 9 ? "GET /x HTTP/1.1\r\n\r\n" : GET);
    send_str(c->fd, batch);
    for (int i = 0; i < 50; i++) http_expect(c, 0, i % 10 == 9 ? 404 : 200, NULL);

    flood_before_reading(port);

    /* A request split across writes, and one whose end comes with the next. */
    send_str(c->fd, "GET / HT");
    sleep_ms(50);
    send_str(c->fd, "TP/1.1\r\nHost: test\r\n");
    sleep_ms(50);
    send_str(c->fd, "\r\nGET / HTTP/1.1\r\n");
    http_expect(c, 0, 200, HELLO);
    send_str(c->fd, "Host: test\r\n\r\n");
    http_expect(c, 0, 200, HELLO);

    /* Connection: close is honoured after the response. */
    send_str(c->fd, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    http_expect(c, 0, 200, HELLO);
    cr_assert(wait_closed(c->fd, now_ms(), IO_TIMEOUT_MS) >= 0,
              "not closed after Connection: close");
    close(c->fd);

    /* Many connections at once, on both workers. */
    enum { N = 40 };
    int fds[N];
    many_connections_at_once(port, fds, N);

    /* SIGTERM with clients connected: a clean exit. */
    server_stop(&srv, "total: connections");
    for (int i = 0; i < N; i++) close(fds[i]);
}

/* Reads raw bytes until the buffer holds `until`; returns the length. */
static size_t recv_until(int fd, char *buf, size_t cap, const char *until) {
    size_t len = 0;
    buf[0] = '\0';
    while (!strstr(buf, until)) {
        cr_assert(len < cap - 1, "response too large: %s", buf);
        ssize_t n = recv_retry(fd, buf + len, cap - 1 - len, 0);
        cr_assert(n > 0, "connection ended before \"%s\"; got:\n%s", until, buf);
        len += (size_t)n;
        buf[len] = '\0';
    }
    return len;
}

Test(http_hello, http10_keepalive_is_answered_with_keepalive) {
    /* An HTTP/1.0 client keeps the connection only if the response says
     * "Connection: keep-alive" (RFC 7230 A.1.2); without it ab -k waits for
     * a close on every request. */
    skip_unless_io_available();
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_HTTP_HELLO"),
                    "--port",
                    "0",
                    "--threads",
                    "1",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, 0);
    int fd = connect_to(port);
    char buf[4096];
    for (int i = 0; i < 3; i++) {
        send_str(fd, "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        recv_until(fd, buf, sizeof buf, HELLO);
        cr_assert(strstr(buf, " 200 OK\r\n"), "request %d: %s", i, buf);
        cr_assert(strcasestr(buf, "\r\nConnection: keep-alive\r\n"),
                  "request %d: no Connection: keep-alive in:\n%s", i, buf);
    }
    /* A plain HTTP/1.0 request still closes the connection after it. */
    send_str(fd, "GET / HTTP/1.0\r\n\r\n");
    recv_until(fd, buf, sizeof buf, HELLO);
    cr_assert(strcasestr(buf, "\r\nConnection: close\r\n"), "no Connection: close in:\n%s", buf);
    cr_assert(wait_closed(fd, now_ms(), IO_TIMEOUT_MS) >= 0, "HTTP/1.0 without keep-alive: open");
    close(fd);
    server_stop(&srv, "total: connections");
}

Test(http_hello, listens_on_ipv6_loopback) {
    skip_unless_io_available();
    int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (probe < 0 || bind(probe, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (probe >= 0) close(probe);
        cr_skip_test("no IPv6 loopback on this machine");
    }
    close(probe);
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_HTTP_HELLO"),
                    "--port",
                    "0",
                    "--threads",
                    "1",
                    "--bind",
                    "::1",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, 0);
    cr_assert(strstr(srv.log, "listening on [::1]:"), "%s", srv.log);
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sa.sin6_port = htons((uint16_t)port);
    cr_assert(connect_retrying(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect [::1]:%d: %s",
              port, strerror(errno));
    struct http_conn *c = http_conn_new();
    c->fd = fd;
    send_str(fd, GET);
    http_expect(c, 0, 200, HELLO);
    close(fd);
    server_stop(&srv, "total: connections");
}

Test(http_hello, closes_idle_connection_after_idle_ms) {
    skip_unless_io_available();
    enum { IDLE_MS = 300 };
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_HTTP_HELLO"),
                    "--port",
                    "0",
                    "--threads",
                    "1",
                    "--idle-ms",
                    "300",
                    "--header-ms",
                    "30000",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, 0);

    /* Silent from the start. */
    uint64_t t0 = now_ms();
    int fd = connect_to(port);
    long took = wait_closed(fd, t0, IDLE_MS + SLACK_MS);
    cr_expect(took >= IDLE_MS - EARLY_MS && took <= IDLE_MS + SLACK_MS,
              "silent connection closed after %ld ms, idle-ms is %d", took, IDLE_MS);
    close(fd);

    /* Silent after a request: the idle time counts from the request. */
    struct http_conn *c = http_conn_new();
    c->fd = connect_to(port);
    send_str(c->fd, GET);
    t0 = now_ms();
    http_expect(c, 0, 200, HELLO);
    took = wait_closed(c->fd, t0, IDLE_MS + SLACK_MS);
    cr_expect(took >= IDLE_MS - EARLY_MS && took <= IDLE_MS + SLACK_MS,
              "connection closed %ld ms after its last request, idle-ms is %d", took, IDLE_MS);
    close(c->fd);
    server_stop(&srv, "idle-closed 2");
    /* The two idle timeouts, measured by the loop itself. */
    cr_expect(strstr(srv.log, "timer lateness (us, as the loop saw it): 2 fired"),
              "no lateness of the 2 idle timers in:\n%s", srv.log);
}

Test(http_hello, requests_restart_the_idle_timer) {
    skip_unless_io_available();
    enum { IDLE_MS = 600, PERIOD_MS = 150, REQUESTS = 12 };
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_HTTP_HELLO"),
                    "--port",
                    "0",
                    "--threads",
                    "1",
                    "--idle-ms",
                    "600",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, 0);
    struct http_conn *c = http_conn_new();
    c->fd = connect_to(port);
    /* 12 requests 150 ms apart outlive the idle time three times over; the
     * connection survives only if each request pushed the deadline back. */
    uint64_t last = 0;
    for (int i = 0; i < REQUESTS; i++) {
        sleep_ms(PERIOD_MS);
        send_str(c->fd, GET);
        last = now_ms();
        http_expect(c, 0, 200, HELLO);
    }
    long took = wait_closed(c->fd, last, IDLE_MS + SLACK_MS);
    cr_expect(took >= IDLE_MS - EARLY_MS && took <= IDLE_MS + SLACK_MS,
              "closed %ld ms after the last request, idle-ms is %d", took, IDLE_MS);
    close(c->fd);
    server_stop(&srv, "idle-closed 1");
}

Test(http_hello, closes_slow_header_after_header_ms) {
    skip_unless_io_available();
    enum { HEADER_MS = 300 };
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_HTTP_HELLO"),
                    "--port",
                    "0",
                    "--threads",
                    "1",
                    "--idle-ms",
                    "60000",
                    "--header-ms",
                    "300",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, 0);
    int fd = connect_to(port);
    send_str(fd, "GET / HTTP/1.1\r\nX-Slow: ");
    uint64_t t0 = now_ms();
    /* A byte every 100 ms: a trickle must not restart the header clock. */
    long took = -1;
    while (took < 0 && now_ms() - t0 <= HEADER_MS + SLACK_MS) {
        took = wait_closed(fd, t0, 100);
        if (took < 0) send(fd, "x", 1, MSG_NOSIGNAL); /* fails once the server has closed */
    }
    cr_expect(took >= HEADER_MS - EARLY_MS && took <= HEADER_MS + SLACK_MS,
              "slow header closed after %ld ms, header-ms is %d", took, HEADER_MS);
    close(fd);
    server_stop(&srv, "header-timeout 1");
}

/* /proc/PID/stat: user + system CPU time, in clock ticks. */
static long cpu_ticks(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    cr_assert(p);
    unsigned long utime = 0, stime = 0;
    cr_assert(
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2);
    return (long)(utime + stime);
}

Test(http_hello, survives_running_out_of_descriptors_without_spinning) {
    skip_unless_io_available();
    enum { NOFILE = 32, CLIENTS = 60 };
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_HTTP_HELLO"),
                    "--port",
                    "0",
                    "--threads",
                    "1",
                    "--idle-ms",
                    "60000",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, NOFILE);

    /* Twice as many connections as the server has descriptors. */
    int fds[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) fds[i] = connect_to(port);
    sleep_ms(300);
    long before = cpu_ticks(srv.pid);
    sleep_ms(1000);
    long used = cpu_ticks(srv.pid) - before;
    long hz = sysconf(_SC_CLK_TCK);
    cr_expect(used * 4 < hz, "server used %ld of %ld ticks in 1 s while out of descriptors", used,
              hz);

    /* The connections the server shed were closed, not left hanging. */
    int shed = 0;
    for (int i = 0; i < CLIENTS; i++) shed += wait_closed(fds[i], now_ms(), 0) >= 0;
    cr_expect(shed > 0, "no connection was shed with %d descriptors", NOFILE);

    /* Once clients leave, the server serves again. */
    for (int i = 0; i < CLIENTS; i++) close(fds[i]);
    struct http_conn *c = http_conn_new();
    uint64_t deadline = now_ms() + IO_TIMEOUT_MS;
    int status = 0;
    char body[64];
    for (;;) {
        c->fd = connect_to(port);
        c->len = 0;
        send_str(c->fd, GET);
        if (http_read(c, 0, &status, body, sizeof body) == 0) break;
        close(c->fd);
        cr_assert(now_ms() < deadline, "not serving again after the clients left");
        sleep_ms(100);
    }
    cr_expect_eq(status, 200);
    close(c->fd);
    server_stop(&srv, "total: connections");
}
