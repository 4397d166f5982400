/* SPDX-License-Identifier: MIT */
/*
 * Smoke tests of the runnable examples (examples/): each is run as a user
 * would run it, as a child process, and driven over loopback TCP
 * (http_hello: examples_http.c; the shared parts: examples_helpers.h).
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

#include "examples_helpers.h"

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
