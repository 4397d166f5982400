/* SPDX-License-Identifier: MIT */
/*
 * I/O backend selection and the cases where epoll and io_uring differ inside:
 * io_uring refused by seccomp (AUTO falls back to epoll, explicit io_uring
 * reports the kernel's error), late completions after stop/restart on a reused
 * fd number, and 10,000 watchers on 10,000 socketpairs. The backend-specific
 * tests run once per I/O kind; kinds this kernel lacks are skipped.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

static tl_loop *new_loop(tl_io_kind io) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = io;
    tl_loop *loop = NULL;
    int r = tl_loop_new(&loop, &opts);
    if (r == -ENOSYS || r == -EPERM)
        cr_skip_test("io kind %d unavailable here: %s", io, tl_strerror(r));
    cr_assert_eq(r, 0, "tl_loop_new: %s", tl_strerror(r));
    return loop;
}

/* Makes io_uring_setup fail with err for this process and its children. */
static int refuse_io_uring(int err) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -errno;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) return -errno;
    return 0;
}

static int fired;
static void count_timer(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    fired++;
}

/* In a child (the filter cannot be undone): exit code 0 when AUTO falls back
 * to a working epoll loop and explicit io_uring returns -err. */
static int child_refused(int err) {
    if (refuse_io_uring(err) < 0) return 10;
    tl_loop *loop;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = TL_IO_URING;
    if (tl_loop_new(&loop, &opts) != -err) return 11;
    opts.io = TL_IO_AUTO;
    if (tl_loop_new(&loop, &opts) != 0) return 12;
    if (strcmp(tl_loop_io_name(loop), "epoll") != 0) return 13;
    tl_timer t;
    tl_timer_init(&t, count_timer, NULL);
    tl_timer_start(loop, &t, 1000000, 0);
    if (tl_loop_run(loop, TL_RUN_DEFAULT) != 0 || fired != 1) return 14;
    return tl_loop_free(loop) == 0 ? 0 : 15;
}

static void expect_fallback(int err) {
    /* The child asks for the default (AUTO), which an outer TICKLOOP_IO
       would override. */
    unsetenv("TICKLOOP_IO");
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(child_refused(err));
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child died");
    cr_assert_eq(WEXITSTATUS(status), 0,
                 "child step %d failed (10: seccomp, 11: explicit "
                 "io_uring error, 12-15: AUTO fallback)",
                 WEXITSTATUS(status));
}

Test(io_backends, auto_falls_back_to_epoll_when_seccomp_returns_eperm) {
    tl_loop *probe = new_loop(TL_IO_URING); /* skips where io_uring never worked */
    tl_loop_free(probe);
    expect_fallback(EPERM);
}

Test(io_backends, auto_falls_back_to_epoll_when_seccomp_returns_enosys) {
    tl_loop *probe = new_loop(TL_IO_URING);
    tl_loop_free(probe);
    expect_fallback(ENOSYS);
}

Test(io_backends, names_match_the_kind_asked_for) {
    tl_loop *loop = new_loop(TL_IO_EPOLL);
    cr_assert_str_eq(tl_loop_io_name(loop), "epoll");
    tl_loop_free(loop);
    loop = new_loop(TL_IO_URING);
    cr_assert_str_eq(tl_loop_io_name(loop), "io_uring");
    tl_loop_free(loop);
}

Test(io_backends, bad_environment_value_is_rejected) {
    setenv("TICKLOOP_IO", "uring", 1);
    tl_loop *loop;
    cr_assert_eq(tl_loop_new(&loop, NULL), -EINVAL);
    setenv("TICKLOOP_IO", "epoll", 1);
    cr_assert_eq(tl_loop_new(&loop, NULL), 0);
    cr_assert_str_eq(tl_loop_io_name(loop), "epoll");
    tl_loop_free(loop);
    unsetenv("TICKLOOP_IO");
}

/* ---- per I/O kind ------------------------------------------------------ */

ParameterizedTestParameters(io_backends, stale_completion_after_restart_on_reused_fd) {
    static tl_io_kind kinds[] = {TL_IO_EPOLL, TL_IO_URING};
    return cr_make_param_array(tl_io_kind, kinds, 2);
}

struct watch {
    tl_io io;
    int calls;
};

static void on_ready(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    struct watch *wa = w->data;
    wa->calls++;
    char buf[64];
    if (revents & TL_READ) cr_assert_geq(read(w->fd, buf, sizeof buf), 0);
}

ParameterizedTest(tl_io_kind *kind, io_backends, stale_completion_after_restart_on_reused_fd) {
    tl_loop *loop = new_loop(*kind);
    int a[2], b[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a), 0);
    struct watch first = {0}, second = {0};
    tl_io_init(&first.io, a[0], on_ready, &first);
    cr_assert_eq(tl_io_start(loop, &first.io, TL_READ), 0);
    /* Put the first watcher's readiness in flight, then replace it. */
    cr_assert_eq(write(a[1], "x", 1), 1);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(first.calls, 1);
    cr_assert_eq(write(a[1], "y", 1), 1); /* a new event for the old registration */
    int old_fd = a[0];
    cr_assert_eq(tl_io_stop(loop, &first.io), 0);
    close(a[0]);
    close(a[1]);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b), 0);
    cr_assert_eq(b[0], old_fd, "the fd number is reused (lowest free)");
    tl_io_init(&second.io, b[0], on_ready, &second);
    cr_assert_eq(tl_io_start(loop, &second.io, TL_READ), 0);
    for (int i = 0; i < 5; i++) cr_assert_eq(tl_loop_run(loop, TL_RUN_NOWAIT), 1);
    cr_assert_eq(first.calls, 1, "a stopped watcher got a late completion");
    cr_assert_eq(second.calls, 0, "the new watcher got the old fd's event");
    cr_assert_eq(write(b[1], "z", 1), 1);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_eq(second.calls, 1);
    tl_io_stop(loop, &second.io);
    close(b[0]);
    close(b[1]);
    cr_assert_eq(tl_loop_free(loop), 0);
}

ParameterizedTestParameters(io_backends, level_triggered_until_drained) {
    static tl_io_kind kinds[] = {TL_IO_EPOLL, TL_IO_URING};
    return cr_make_param_array(tl_io_kind, kinds, 2);
}

static void read_one_byte(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    (void)revents;
    struct watch *wa = w->data;
    char c;
    if (read(w->fd, &c, 1) == 1) wa->calls++;
}

/* A callback that leaves data unread is called again next iteration. */
ParameterizedTest(tl_io_kind *kind, io_backends, level_triggered_until_drained) {
    tl_loop *loop = new_loop(*kind);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    struct watch w = {0};
    tl_io_init(&w.io, sv[0], read_one_byte, &w);
    cr_assert_eq(tl_io_start(loop, &w.io, TL_READ), 0);
    cr_assert_eq(write(sv[1], "abc", 3), 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    cr_assert_eq(w.calls, 3, "each iteration reads one of the three bytes");
    tl_io_stop(loop, &w.io);
    close(sv[0]);
    close(sv[1]);
    tl_loop_free(loop);
}

ParameterizedTestParameters(io_backends, ten_thousand_socketpairs) {
    static tl_io_kind kinds[] = {TL_IO_EPOLL, TL_IO_URING};
    return cr_make_param_array(tl_io_kind, kinds, 2);
}

enum { kPairs = 10000 };

ParameterizedTest(tl_io_kind *kind, io_backends, ten_thousand_socketpairs, .timeout = 120) {
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2 * kPairs + 64)
        cr_skip_test("RLIMIT_NOFILE hard limit %lu is below %d", (unsigned long)rl.rlim_max,
                     2 * kPairs + 64);
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 2 * kPairs + 64 : rl.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);

    tl_loop *loop = new_loop(*kind);
    int(*pairs)[2] = calloc(kPairs, sizeof *pairs);
    struct watch *watches = calloc(kPairs, sizeof *watches);
    cr_assert(pairs && watches);
    for (int i = 0; i < kPairs; i++) {
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pairs[i]), 0);
        tl_io_init(&watches[i].io, pairs[i][0], on_ready, &watches[i]);
        cr_assert_eq(tl_io_start(loop, &watches[i].io, TL_READ), 0);
    }
    for (int i = 0; i < kPairs; i++) cr_assert_eq(write(pairs[i][1], "x", 1), 1);
    int done = 0;
    for (int rounds = 0; done < kPairs && rounds < 10000; rounds++) {
        cr_assert_geq(tl_loop_run(loop, TL_RUN_ONCE), 0);
        done = 0;
        for (int i = 0; i < kPairs; i++) done += watches[i].calls > 0;
    }
    for (int i = 0; i < kPairs; i++)
        cr_assert_eq(watches[i].calls, 1, "watcher %d ran %d times", i, watches[i].calls);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert_eq(st.io_events, kPairs);
    for (int i = 0; i < kPairs; i++) {
        tl_io_stop(loop, &watches[i].io);
        close(pairs[i][0]);
        close(pairs[i][1]);
    }
    cr_assert_eq(tl_loop_free(loop), 0);
    free(pairs);
    free(watches);
}
