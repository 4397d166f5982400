/* SPDX-License-Identifier: MIT */
/*
 * Smoke tests of the runnable examples (examples/): each is run as a user
 * would run it, as a child process, and driven over loopback TCP.
 *
 * The servers are started with --port 0 and report the port they bound on
 * their first "listening on ADDR:PORT" line. Every server must exit 0 on
 * SIGTERM with clients still connected. Time bounds are generous (a slow
 * two-core machine under ASan+UBSan) but every check can fail: a server
 * that never closes an idle connection, closes it early, spins on EMFILE or
 * answers wrongly fails its test.
 *
 * Meson passes the binaries in TL_EXAMPLE_<NAME> and the I/O backend to pass
 * with --io in TL_EXAMPLE_IO; the suite is registered once per backend.
 */
#define _GNU_SOURCE
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
#include <tickloop/timer_backend.h>

/* How long a slow machine may take to start a server or finish a request. */
enum { STARTUP_MS = 30000, IO_TIMEOUT_MS = 15000, EXIT_MS = 30000 };

/* Extra time a timeout may take beyond its nominal value before the test
 * calls it a failure: scheduling delays on a loaded, sanitized build. */
enum { SLACK_MS = 3000 };
/* A timeout may appear to fire this much early to the client: the server's
 * clock starts at its accept iteration, which can begin before connect()
 * returns here. */
enum { EARLY_MS = 50 };

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static const char *example(const char *env) {
    const char *path = getenv(env);
    cr_assert(path && *path, "%s is not set (run through meson test)", env);
    return path;
}

static const char *io_kind(void) {
    const char *io = getenv("TL_EXAMPLE_IO");
    return io && *io ? io : "auto";
}

/* Skips the test when the selected I/O backend cannot work here: only a
 * missing kernel or build feature is a reason, never a failing example. */
static void skip_unless_io_available(void) {
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
static int child_read(struct child *c, int timeout_ms);

/* Shows what the child printed, to explain a failure. */
static void kill_current_child(void) {
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
static void child_start(struct child *c, char *const argv[], rlim_t nofile) {
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

static int child_read(struct child *c, int timeout_ms) {
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
static int child_wait(struct child *c, int timeout_ms) {
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
static int run_to_end(struct child *c, char *const argv[], int timeout_ms) {
    child_start(c, argv, 0);
    return child_wait(c, timeout_ms);
}

static void assert_exit_0(struct child *c, int status, const char *what) {
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: %s %d, output:\n%s", what,
              WIFEXITED(status) ? "exit status" : "killed by signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), c->log);
}

/* Starts a server and returns the port from its "listening on" line. */
static int server_start(struct child *c, char *const argv[], rlim_t nofile) {
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
static void server_stop(struct child *c, const char *stats_marker) {
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
static int connect_retrying(int fd, const struct sockaddr *sa, socklen_t len) {
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

static int connect_to(int port) {
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
static ssize_t recv_retry(int fd, void *buf, size_t len, int flags) {
    ssize_t n;
    while ((n = recv(fd, buf, len, flags)) < 0 && errno == EINTR) {
    }
    return n;
}

static void send_str(int fd, const char *s) {
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
static long wait_closed(int fd, uint64_t since, int timeout_ms) {
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
static struct http_conn *http_conn_new(void) {
    static struct http_conn pool[2];
    static unsigned next;
    struct http_conn *c = &pool[next++ % 2];
    memset(c, 0, sizeof *c);
    return c;
}

/* Reads one response into *status and body (NUL-terminated); responses to
 * HEAD have no body. Returns 0, or -1 if the connection ended first. */
static int http_read(struct http_conn *c, int head, int *status, char *body, size_t cap) {
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
static void http_expect_at(struct http_conn *c, int head, int want_status, const char *want_body,
                           int line) {
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

/* ------------------------------------------------------------------------ */
/* hello, hello_cpp                                                         */
/* ------------------------------------------------------------------------ */

TestSuite(examples, .timeout = 120, .fini = kill_current_child);

Test(examples, hello_runs_on_every_backend) {
    skip_unless_io_available();
    struct child c;
    char *argv[] = {(char *)example("TL_EXAMPLE_HELLO"), "--io", (char *)io_kind(), NULL};
    int status = run_to_end(&c, argv, EXIT_MS);
    assert_exit_0(&c, status, "hello");
    const char *names[16];
    size_t n = tl_timer_backend_names(names, 16);
    for (size_t i = 0; i < n && i < 16; i++)
        cr_expect(strstr(c.log, names[i]), "no line for %s in:\n%s", names[i], c.log);
}

Test(examples, hello_cpp_runs) {
    skip_unless_io_available();
    struct child c;
    char *argv[] = {(char *)example("TL_EXAMPLE_HELLO_CPP"), "--io", (char *)io_kind(), NULL};
    int status = run_to_end(&c, argv, EXIT_MS);
    assert_exit_0(&c, status, "hello_cpp");
}

/* The embedding examples, on every registered timer backend: each prints
 * one line and exits 0 only if every timer tick crossed to the host loop and
 * its answer came back as tickloop I/O, no tick early. */
static void check_embed_example(const char *path, const char *what) {
    skip_unless_io_available();
    const char *names[16];
    size_t n = tl_timer_backend_names(names, 16);
    for (size_t i = 0; i < n && i < 16; i++) {
        struct child c;
        char *argv[] = {(char *)path, "--io",           (char *)io_kind(),
                        "--timers",   (char *)names[i], NULL};
        int status = run_to_end(&c, argv, EXIT_MS);
        assert_exit_0(&c, status, what);
        cr_expect(strstr(c.log, "ticks=10 host_reads=10 answers=10 early=0"), "%s %s: %s", what,
                  names[i], c.log);
    }
}

Test(examples, embed_poll_drives_timers_and_io_from_a_poll_host) {
    check_embed_example(example("TL_EXAMPLE_EMBED_POLL"), "embed_poll");
}

Test(examples, embed_glib_drives_timers_and_io_from_glib) {
    const char *path = getenv("TL_EXAMPLE_EMBED_GLIB");
    if (!path || !*path) cr_skip_test("built without GLib (libglib2.0-dev)");
    check_embed_example(path, "embed_glib");
}

Test(examples, bad_arguments_exit_2_and_unknown_backend_exits_1) {
    struct child c;
    const char *exes[] = {"TL_EXAMPLE_HELLO",      "TL_EXAMPLE_HTTP_HELLO",
                          "TL_EXAMPLE_IDLE_ECHO",  "TL_EXAMPLE_DELAYED_TASKS",
                          "TL_EXAMPLE_EMBED_POLL", "TL_EXAMPLE_CUSTOM_BACKEND",
                          "TL_EXAMPLE_HELLO_CPP"};
    for (size_t i = 0; i < sizeof exes / sizeof exes[0]; i++) {
        char *bad[] = {(char *)example(exes[i]), "--no-such-option", "1", NULL};
        int status = run_to_end(&c, bad, EXIT_MS);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 2, "%s --no-such-option: %s", bad[0],
                  c.log);
        /* The message names the flag (not "needs a value" or a value). */
        cr_expect(strstr(c.log, "unknown option: --no-such-option"), "%s: %s", bad[0], c.log);
        char *help[] = {(char *)example(exes[i]), "--help", NULL};
        status = run_to_end(&c, help, EXIT_MS);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(c.log, "usage:"),
                  "%s --help: %s", help[0], c.log);
        char *unknown[] = {
            (char *)example(exes[i]), "--timers", "no-such-backend", "--port", "0", NULL};
        if (i == 0 || i >= 3) unknown[3] = NULL; /* only http_hello and idle_echo take --port */
        status = run_to_end(&c, unknown, EXIT_MS);
        /* Named, with the registered ones (not "No such file or directory"),
           once, and nothing else printed (no table header, no other
           backend's attempt). */
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
                      strstr(c.log, "unknown timer backend 'no-such-backend'; registered: heap2, "
                                    "heap4, wheel, hwheel"),
                  "%s --timers no-such-backend: %s", unknown[0], c.log);
        cr_expect(!strstr(c.log, "No such file"), "%s: %s", unknown[0], c.log);
        const char *first = strstr(c.log, "no-such-backend");
        cr_expect(first && !strstr(strchr(first, '\n') ? strchr(first, '\n') : first + 1,
                                   "no-such-backend"),
                  "%s: more than one message:\n%s", unknown[0], c.log);
    }
}

/* A wrong TICKLOOP_TIMERS or TICKLOOP_IO is reported once, naming the
 * variable, and the program exits 1 (hello ignored TICKLOOP_TIMERS, since it
 * named every backend itself, and said "Invalid argument" four times for
 * TICKLOOP_IO=EPOLL). */
Test(examples, bad_environment_is_reported_once) {
    struct child c;
    const char *exes[] = {"TL_EXAMPLE_HELLO", "TL_EXAMPLE_HELLO_CPP", "TL_EXAMPLE_DELAYED_TASKS",
                          "TL_EXAMPLE_EMBED_POLL"};
    const char *vars[][3] = {{"TICKLOOP_TIMERS", "bogus", "TICKLOOP_TIMERS"},
                             {"TICKLOOP_IO", "EPOLL", "TICKLOOP_IO='EPOLL'"}};
    for (size_t v = 0; v < 2; ++v) {
        setenv(vars[v][0], vars[v][1], 1);
        for (size_t i = 0; i < sizeof exes / sizeof exes[0]; i++) {
            char *argv[] = {(char *)example(exes[i]), NULL};
            int status = run_to_end(&c, argv, EXIT_MS);
            cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s with %s=%s: status %d: %s",
                      argv[0], vars[v][0], vars[v][1], status, c.log);
            const char *at = strstr(c.log, vars[v][2]);
            cr_expect(at && !strstr(at + 1, vars[v][2]), "%s with %s=%s: not named once:\n%s",
                      argv[0], vars[v][0], vars[v][1], c.log);
            cr_expect(!strstr(c.log, "start/op"), "%s: a table header:\n%s", argv[0], c.log);
        }
        unsetenv(vars[v][0]);
    }
}

/* Ctrl-C stops the whole program, exit 130 (the shell's convention), with no
 * failure reported: hello stopped only the backend running and ran the
 * others in full (exit 1); hello_cpp exited 1. */
static int count_lines_with(const char *log, const char *what) {
    int n = 0;
    for (const char *p = strstr(log, what); p; p = strstr(p + 1, what)) ++n;
    return n;
}

Test(examples, hello_stops_on_sigint) {
    skip_unless_io_available();
    struct child c;
    char *argv[] = {(char *)example("TL_EXAMPLE_HELLO"), "--io", (char *)io_kind(), NULL};
    child_start(&c, argv, 0);
    uint64_t deadline = now_ms() + STARTUP_MS;
    while (!strstr(c.log, " io=")) { /* the first backend's line: the second runs */
        cr_assert(child_read(&c, 100) != 0, "exited early:\n%s", c.log);
        cr_assert(now_ms() < deadline, "no output:\n%s", c.log);
    }
    cr_assert(kill(c.pid, SIGINT) == 0);
    int status = child_wait(&c, EXIT_MS);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d, output:\n%s", status,
              c.log);
    cr_expect(strstr(c.log, "interrupted by SIGINT"), "output:\n%s", c.log);
    size_t backends = tl_timer_backend_names(NULL, 0);
    cr_expect(count_lines_with(c.log, " io=") < (int)backends,
              "every backend ran after the SIGINT:\n%s", c.log);
}

Test(examples, hello_cpp_stops_on_sigint) {
    skip_unless_io_available();
    /* The run lasts 0.5 s: a slow machine may finish it before the signal
       lands, so up to three tries. */
    for (int attempt = 0; attempt < 3; ++attempt) {
        struct child c;
        char *argv[] = {(char *)example("TL_EXAMPLE_HELLO_CPP"), "--io", (char *)io_kind(), NULL};
        child_start(&c, argv, 0);
        uint64_t deadline = now_ms() + STARTUP_MS;
        while (!strstr(c.log, "running for")) {
            cr_assert(child_read(&c, 100) != 0, "exited early:\n%s", c.log);
            cr_assert(now_ms() < deadline, "no output:\n%s", c.log);
        }
        cr_assert(kill(c.pid, SIGINT) == 0);
        int status = child_wait(&c, EXIT_MS);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !strstr(c.log, "interrupted"))
            continue; /* finished before the signal */
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d, output:\n%s", status,
                  c.log);
        cr_expect(strstr(c.log, "interrupted by SIGINT"), "output:\n%s", c.log);
        return;
    }
    cr_skip_test("hello_cpp finished before SIGINT three times (a slow machine)");
}

/* ------------------------------------------------------------------------ */
/* http_hello                                                               */
/* ------------------------------------------------------------------------ */

TestSuite(http_hello, .timeout = 120, .fini = kill_current_child);

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

    /* A client that sends many requests before reading any response: the
     * server must stop reading while its output is stuck, and resume the
     * requests it already holds once the client reads. */
    {
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
    for (int i = 0; i < N; i++) {
        fds[i] = connect_to(port);
        send_str(fds[i], GET);
    }
    for (int i = 0; i < N; i++) {
        c->fd = fds[i];
        c->len = 0;
        http_expect(c, 0, 200, HELLO);
    }

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

/* ------------------------------------------------------------------------ */
/* idle_echo                                                                */
/* ------------------------------------------------------------------------ */

TestSuite(idle_echo, .timeout = 120, .fini = kill_current_child);

Test(idle_echo, echoes_small_and_large_messages) {
    skip_unless_io_available();
    struct child srv;
    char *argv[] = {
        (char *)example("TL_EXAMPLE_IDLE_ECHO"), "--port", "0", "--io", (char *)io_kind(), NULL};
    int port = server_start(&srv, argv, 0);

    int fd = connect_to(port);
    char buf[64];
    send_str(fd, "ping\n");
    size_t got = 0;
    while (got < 5) {
        ssize_t n = recv_retry(fd, buf + got, sizeof buf - got, 0);
        cr_assert(n > 0, "echo: %s", n < 0 ? strerror(errno) : "closed");
        got += (size_t)n;
    }
    cr_assert(memcmp(buf, "ping\n", 5) == 0);

    /* 4 MiB, written while reading: the server must apply back-pressure
     * rather than drop or reorder anything. */
    enum { BIG = 4 << 20 };
    static unsigned char out[BIG], in[BIG];
    for (size_t i = 0; i < BIG; i++) out[i] = (unsigned char)(i * 2654435761u >> 13);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    size_t sent = 0, recvd = 0;
    uint64_t deadline = now_ms() + IO_TIMEOUT_MS * 2;
    while (recvd < BIG) {
        cr_assert(now_ms() < deadline, "large echo stalled at %zu of %d bytes", recvd, BIG);
        struct pollfd p = {fd, (short)(POLLIN | (sent < BIG ? POLLOUT : 0)), 0};
        poll(&p, 1, 1000);
        if (sent < BIG && (p.revents & POLLOUT)) {
            ssize_t n = send(fd, out + sent, BIG - sent, MSG_NOSIGNAL);
            if (n > 0) sent += (size_t)n;
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv_retry(fd, in + recvd, BIG - recvd, 0);
            cr_assert(n > 0 || (n < 0 && errno == EAGAIN), "recv: %s",
                      n < 0 ? strerror(errno) : "closed");
            if (n > 0) recvd += (size_t)n;
        }
    }
    cr_assert(memcmp(in, out, BIG) == 0, "the echo differs from what was sent");

    /* SIGTERM with the client still connected: a clean exit. */
    server_stop(&srv, "bytes echoed");
    close(fd);
}

Test(idle_echo, closes_idle_connection_and_keeps_busy_one) {
    skip_unless_io_available();
    enum { IDLE_MS = 400, PERIOD_MS = 100 };
    struct child srv;
    char *argv[] = {(char *)example("TL_EXAMPLE_IDLE_ECHO"),
                    "--port",
                    "0",
                    "--idle-ms",
                    "400",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int port = server_start(&srv, argv, 0);

    uint64_t t0 = now_ms();
    int idle = connect_to(port);
    long took = wait_closed(idle, t0, IDLE_MS + SLACK_MS);
    cr_expect(took >= IDLE_MS - EARLY_MS && took <= IDLE_MS + SLACK_MS,
              "silent connection closed after %ld ms, idle-ms is %d", took, IDLE_MS);
    close(idle);

    /* Data every 100 ms for 1.2 s keeps a connection open (the timer is
     * re-armed lazily, for the time left since the last read). */
    int busy = connect_to(port);
    uint64_t last = 0;
    for (int i = 0; i < 12; i++) {
        sleep_ms(PERIOD_MS);
        send_str(busy, "x");
        last = now_ms();
        char ch;
        cr_assert(recv_retry(busy, &ch, 1, 0) == 1 && ch == 'x', "busy connection lost at %d", i);
    }
    took = wait_closed(busy, last, IDLE_MS + SLACK_MS);
    cr_expect(took >= IDLE_MS - EARLY_MS && took <= IDLE_MS + SLACK_MS,
              "busy connection closed %ld ms after its last data, idle-ms is %d", took, IDLE_MS);
    close(busy);
    server_stop(&srv, "idle-closed 2");
}

/* ------------------------------------------------------------------------ */
/* delayed_tasks                                                            */
/* ------------------------------------------------------------------------ */

Test(examples, delayed_tasks_fire_none_early_on_any_backend) {
    skip_unless_io_available();
    struct child c;
    /* 20000 tasks due in 45..135 ms, 90% cancelled. */
    char *argv[] = {(char *)example("TL_EXAMPLE_DELAYED_TASKS"),
                    "--tasks",
                    "20000",
                    "--cancel-pct",
                    "90",
                    "--time-scale",
                    "20000",
                    "--timers",
                    "all",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    int status = run_to_end(&c, argv, EXIT_MS * 2);
    assert_exit_0(&c, status, "delayed_tasks");
    cr_expect(strstr(c.log, "result: ok, 0 early"), "output:\n%s", c.log);
    const char *names[16];
    size_t n = tl_timer_backend_names(names, 16);
    for (size_t i = 0; i < n && i < 16; i++)
        cr_expect(strstr(c.log, names[i]), "no row for %s in:\n%s", names[i], c.log);
}

Test(examples, delayed_tasks_reports_on_sigint) {
    /* Ctrl-C in the middle of a run prints the report of what fired so far
     * and exits 130, with --timers all (the parent forwards the signal to the
     * child running a backend and runs no further backend). */
    skip_unless_io_available();
    struct child c;
    /* 20000 tasks due in 45..135 s: the run is still waiting at the signal. */
    char *argv[] = {(char *)example("TL_EXAMPLE_DELAYED_TASKS"),
                    "--tasks",
                    "20000",
                    "--time-scale",
                    "20",
                    "--timers",
                    "all",
                    "--io",
                    (char *)io_kind(),
                    NULL};
    child_start(&c, argv, 0);
    uint64_t deadline = now_ms() + STARTUP_MS;
    while (!strstr(c.log, "B/task\n")) { /* the header's last line */
        cr_assert(child_read(&c, 100) != 0, "exited early:\n%s", c.log);
        cr_assert(now_ms() < deadline, "no header:\n%s", c.log);
    }
    sleep_ms(500); /* into the first backend's burst or wait */
    cr_assert(kill(c.pid, SIGINT) == 0);
    int status = child_wait(&c, EXIT_MS);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d, output:\n%s", status,
              c.log);
    cr_expect(strstr(c.log, "interrupted by SIGINT"), "output:\n%s", c.log);
    cr_expect(strstr(c.log, "result: interrupted, 0 early"), "output:\n%s", c.log);
}

/* ------------------------------------------------------------------------ */
/* custom_backend                                                           */
/* ------------------------------------------------------------------------ */

Test(examples, custom_backend_registers_and_fires_in_order) {
    skip_unless_io_available();
    struct child c;
    char *argv[] = {(char *)example("TL_EXAMPLE_CUSTOM_BACKEND"), "--io", (char *)io_kind(), NULL};
    int status = run_to_end(&c, argv, EXIT_MS);
    assert_exit_0(&c, status, "custom_backend");
    cr_expect(strstr(c.log, "timers: sorted_list"), "output:\n%s", c.log);
    cr_expect(strstr(c.log, "6 callbacks, in order"), "output:\n%s", c.log);
    cr_expect(!strstr(c.log, "EARLY"), "output:\n%s", c.log);
}
