/* SPDX-License-Identifier: MIT */
/*
 * What the example smoke tests (examples_smoke.c, examples_http.c) share:
 * the time bounds, the example binaries meson passes in TL_EXAMPLE_<NAME>,
 * child processes (start, read, wait, stop a server), and loopback clients
 * (connect, send, HTTP responses). Users define _GNU_SOURCE first.
 */
#ifndef TICKLOOP_TESTS_EXAMPLES_HELPERS_H
#define TICKLOOP_TESTS_EXAMPLES_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <tickloop/tickloop.h>

/* How long a slow machine may take to start a server or finish a request. */
enum { STARTUP_MS = 30000, IO_TIMEOUT_MS = 15000, EXIT_MS = 30000 };

/* Extra time a timeout may take beyond its nominal value before the test
 * calls it a failure: scheduling delays on a loaded, sanitized build. */
enum { SLACK_MS = 3000 };
/* A timeout may appear to fire this much early to the client: the server's
 * clock starts at its accept iteration, which can begin before connect()
 * returns here. */
enum { EARLY_MS = 50 };

static inline uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static inline const char *example(const char *env) {
    const char *path = getenv(env);
    cr_assert(path && *path, "%s is not set (run through meson test)", env);
    return path;
}

static inline const char *io_kind(void) {
    const char *io = getenv("TL_EXAMPLE_IO");
    return io && *io ? io : "auto";
}

/* Skips the test when the selected I/O backend cannot work here: only a
 * missing kernel or build feature is a reason, never a failing example. */
static inline void skip_unless_io_available(void) {
    if (strcmp(io_kind(), "io_uring") != 0) return;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = TL_IO_URING;
    tl_loop *loop;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) cr_skip_test("io_uring is not available here: %s", tl_strerror(r));
    tl_loop_free(loop);
}

/* ------------------------------------------------------------------------ */
/* Child processes                                                          */
/* ------------------------------------------------------------------------ */

struct child {
    pid_t pid;
    int out_fd; /* the read end of the child's stdout and stderr */
    size_t log_len;
    char log[16384];
};

/* The child of the running test, killed by the fini hook if an assertion
 * ends the test early. */
static struct child *current_child;

/* Reads the child's output for up to timeout_ms; returns 0 at EOF. */
static inline int child_read(struct child *c, int timeout_ms);

/* Shows what the child printed, to explain a failure. */
static inline void kill_current_child(void) {
    if (current_child && current_child->pid > 0) {
        kill(current_child->pid, SIGKILL);
        waitpid(current_child->pid, NULL, 0);
        current_child->pid = 0;
        while (child_read(current_child, 0) > 0) {
        }
        fprintf(stderr, "output of the example:\n%s\n", current_child->log);
    }
}

/* Starts argv[0] with stdout and stderr into a pipe. nofile, if non-zero,
 * is the child's RLIMIT_NOFILE. */
static inline void child_start(struct child *c, char *const argv[], rlim_t nofile) {
    int fds[2];
    cr_assert(pipe2(fds, O_CLOEXEC) == 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* Die with the test, start from a clean signal state, and hold no
         * descriptor of the test's: the EMFILE test counts them. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close_range(3, ~0u, 0);
        if (nofile) {
            struct rlimit rl = {nofile, nofile};
            setrlimit(RLIMIT_NOFILE, &rl);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    c->pid = pid;
    c->out_fd = fds[0];
    c->log_len = 0;
    c->log[0] = '\0';
    current_child = c;
}

static inline int child_read(struct child *c, int timeout_ms) {
    struct pollfd p = {c->out_fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r <= 0) return -1;
    char buf[4096];
    ssize_t n = read(c->out_fd, buf, sizeof buf);
    if (n <= 0) return 0;
    size_t room = sizeof c->log - 1 - c->log_len;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(c->log + c->log_len, buf, take);
    c->log_len += take;
    c->log[c->log_len] = '\0';
    return 1;
}

/* Waits for the child to exit, collecting its output; returns the wait
 * status, after killing it if it outlives timeout_ms. */
static inline int child_wait(struct child *c, int timeout_ms) {
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    while (now_ms() < deadline && child_read(c, 100) != 0) {
    }
    int status = 0;
    pid_t r;
    while ((r = waitpid(c->pid, &status, WNOHANG)) == 0 && now_ms() < deadline) sleep_ms(20);
    if (r == 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &status, 0);
        c->pid = 0;
        close(c->out_fd);
        cr_assert_fail("%s did not exit within %d ms; output:\n%s", "child", timeout_ms, c->log);
    }
    c->pid = 0;
    close(c->out_fd);
    current_child = NULL;
    return status;
}

/* Runs a program to completion; returns its wait status. */
static inline int run_to_end(struct child *c, char *const argv[], int timeout_ms) {
    child_start(c, argv, 0);
    return child_wait(c, timeout_ms);
}

static inline void assert_exit_0(struct child *c, int status, const char *what) {
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %s %d, output:\n%s", what,
              WIFEXITED(status) ? "exit status" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), c->log);
}

/* Starts a server and returns the port from its "listening on" line. */
static inline int server_start(struct child *c, char *const argv[], rlim_t nofile) {
    child_start(c, argv, nofile);
    uint64_t deadline = now_ms() + STARTUP_MS;
    const char *line;
    while (!(line = strstr(c->log, "listening on ")) || !strchr(line, '\n')) {
        int r = child_read(c, 100);
        cr_assert(r != 0, "%s exited before listening; output:\n%s", argv[0], c->log);
        cr_assert(now_ms() < deadline, "%s did not start listening; output:\n%s", argv[0], c->log);
    }
    /* "listening on 127.0.0.1:PORT ..." or "listening on [::1]:PORT ...": the
     * port follows the last ':' of the address. */
    const char *colon = strchr(line + strlen("listening on "), ' ');
    while (colon && colon > line && *colon != ':') colon--;
    int port = colon && *colon == ':' ? atoi(colon + 1) : 0;
    cr_assert(port > 0, "no port in: %s", line);
    return port;
}

/* SIGTERM must stop the server cleanly: exit status 0. */
static inline void server_stop(struct child *c, const char *stats_marker) {
    cr_assert(kill(c->pid, SIGTERM) == 0);
    int status = child_wait(c, EXIT_MS);
    assert_exit_0(c, status, "after SIGTERM");
    cr_expect(strstr(c->log, stats_marker), "no statistics (\"%s\") in:\n%s", stats_marker, c->log);
}

/* ------------------------------------------------------------------------ */
/* Clients                                                                  */
/* ------------------------------------------------------------------------ */

/* connect() that survives a signal (the servers these tests fork end with
 * SIGCHLD): an interrupted connect goes on in the kernel, so it is waited
 * for and its result read from SO_ERROR, never retried (that would be
 * EALREADY). Returns 0, or -1 with errno set. */
static inline int connect_retrying(int fd, const struct sockaddr *sa, socklen_t len) {
    if (connect(fd, sa, len) == 0) return 0;
    if (errno != EINTR) return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r;
    while ((r = poll(&p, 1, IO_TIMEOUT_MS)) < 0 && errno == EINTR) {
    }
    if (r == 0) errno = ETIMEDOUT;
    if (r <= 0) return -1;
    int err = 0;
    socklen_t elen = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) return -1;
    errno = err;
    return err ? -1 : 0;
}

static inline int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    struct timeval tv = {IO_TIMEOUT_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    cr_assert(connect_retrying(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect to %d: %s",
              port, strerror(errno));
    return fd;
}

/* recv() that retries when a signal interrupts it (the test runner may
 * deliver some); returns what recv returned, errno set on -1. */
static inline ssize_t recv_retry(int fd, void *buf, size_t len, int flags) {
    ssize_t n;
    while ((n = recv(fd, buf, len, flags)) < 0 && errno == EINTR) {
    }
    return n;
}

static inline void send_str(int fd, const char *s) {
    size_t len = strlen(s), off = 0;
    while (off < len) {
        ssize_t n = send(fd, s + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        cr_assert(n > 0, "send: %s", n < 0 ? strerror(errno) : "0");
        off += (size_t)n;
    }
}

/* Waits until the server closes fd; returns the milliseconds it took from
 * `since`, or -1 if data arrived or nothing happened within timeout_ms. */
static inline long wait_closed(int fd, uint64_t since, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    int r;
    while ((r = poll(&p, 1, (int)(deadline - now_ms()))) < 0 && errno == EINTR &&
           now_ms() < deadline) {
    }
    if (r <= 0) return -1;
    char c;
    ssize_t n = recv_retry(fd, &c, 1, MSG_DONTWAIT);
    if (n > 0) return -1;
    if (n < 0 && errno != ECONNRESET) return -1;
    return (long)(now_ms() - since);
}

struct http_conn {
    int fd;
    size_t len;
    char buf[16384];
};

/* A zeroed connection buffer. Static storage, not malloc: a test that fails
 * an assertion leaves at once, and must not be reported for a leak. */
static inline struct http_conn *http_conn_new(void) {
    static struct http_conn pool[2];
    static unsigned next;
    struct http_conn *c = &pool[next++ % 2];
    memset(c, 0, sizeof *c);
    return c;
}

/* Reads one response into *status and body (NUL-terminated); responses to
 * HEAD have no body. Returns 0, or -1 if the connection ended first. */
static inline int http_read(struct http_conn *c, int head, int *status, char *body, size_t cap) {
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4))) {
        cr_assert(c->len < sizeof c->buf, "response header too large");
        ssize_t n = recv_retry(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n <= 0) return -1;
        c->len += (size_t)n;
    }
    size_t header_len = (size_t)(end + 4 - c->buf);
    *end = '\0';
    cr_assert(sscanf(c->buf, "HTTP/1.1 %d", status) == 1, "bad status line: %s", c->buf);
    const char *cl = strcasestr(c->buf, "\r\nContent-Length:");
    cr_assert(cl, "no Content-Length in: %s", c->buf);
    size_t body_len = head ? 0 : strtoul(cl + 17, NULL, 10);
    while (c->len < header_len + body_len) {
        ssize_t n = recv_retry(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (n <= 0) return -1;
        c->len += (size_t)n;
    }
    size_t copy = body_len < cap - 1 ? body_len : cap - 1;
    memcpy(body, c->buf + header_len, copy);
    body[copy] = '\0';
    c->len -= header_len + body_len;
    memmove(c->buf, c->buf + header_len + body_len, c->len);
    return 0;
}

/* Reads one response and checks it; line is the caller's, for the report. */
static inline void http_expect_at(struct http_conn *c, int head, int want_status,
                                  const char *want_body, int line) {
    int status = 0;
    char body[256];
    errno = 0;
    cr_assert(http_read(c, head, &status, body, sizeof body) == 0,
              "line %d: no response (expected %d): %s", line, want_status,
              errno ? strerror(errno) : "connection closed");
    cr_assert(status == want_status, "line %d: status %d, expected %d", line, status, want_status);
    if (want_body)
        cr_assert(strcmp(body, want_body) == 0, "line %d: body \"%s\", expected \"%s\"", line, body,
                  want_body);
}
#define http_expect(c, head, status, body) http_expect_at(c, head, status, body, __LINE__)

static const char GET[] = "GET / HTTP/1.1\r\nHost: test\r\n\r\n";
static const char HELLO[] = "Hello, World!\n";

#endif /* TICKLOOP_TESTS_EXAMPLES_HELPERS_H */
