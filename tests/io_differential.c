/* SPDX-License-Identifier: MIT */
/*
 * The differential test of the I/O backends: every scenario runs once on
 * epoll and once on io_uring, in fresh descriptors each time, and both must
 * give the same tl_io_start result and the same revents in every step. Some
 * scenarios also pin the expected trace, where tickloop's header promises it
 * (a half-close is TL_READ, not TL_HUP; an unpollable file is -EPERM).
 *
 * A scenario is a setup that returns the fd to watch, the events to watch,
 * and up to kMaxSteps actions. Each step performs its action, then runs one
 * loop iteration (TL_RUN_ONCE, bounded by a 20 ms timer) and records the OR
 * of the revents the watcher's callback got in it (0: no callback). The
 * callback never reads: level-triggered readiness repeats until a step
 * consumes it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <tickloop/tickloop.h>

#define MS 1000000ull
enum { kMaxSteps = 8 };
#define NONE 0xffu /* an expected step that is not pinned */

typedef struct fixture {
    int fd[4];
    pid_t pid;
    char dir[64];
} fixture;

typedef struct scenario {
    int (*setup)(fixture *f); /* returns the fd to watch */
    unsigned events;
    int steps;
    void (*step)(fixture *f, int i); /* before iteration i; may be NULL */
    int expect_start;                /* tl_io_start's result on both      */
    unsigned expect[kMaxSteps];      /* pinned revents, or NONE           */
} scenario;

typedef struct trace {
    int start;
    unsigned revents[kMaxSteps];
} trace;

/* Waits until poll(2) reports one of events on fd (POLLERR and POLLHUP it
 * reports always; events 0 waits for those alone): what a step sets off in
 * the kernel (loopback TCP through a softirq, a tty through a worker, a
 * timer) has happened before the loop looks. Bounded by 5 s. */
static void await_ready(int fd, short events) {
    struct pollfd p = {.fd = fd, .events = events};
    int n;
    do n = poll(&p, 1, 5000);
    while (n < 0 && errno == EINTR);
    cr_assert(n == 1, "fd %d: none of events %#x within 5 s", fd, (unsigned)events);
}

static void on_io(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    *(unsigned *)w->data |= revents;
}

static void on_timer(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
}

static void close_all(fixture *f) {
    for (int i = 0; i < 4; ++i)
        if (f->fd[i] >= 0) close(f->fd[i]);
    if (f->pid > 0) {
        kill(f->pid, SIGKILL);
        waitpid(f->pid, NULL, 0);
    }
    if (f->dir[0]) {
        char path[96];
        snprintf(path, sizeof path, "%s/f", f->dir);
        unlink(path);
        rmdir(f->dir);
    }
}

/* Returns 0 when the kind is unavailable (skip), else 1 with *out filled. */
static int run_on(tl_io_kind kind, const scenario *sc, trace *out) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = kind;
    tl_loop *loop;
    int r = tl_loop_new(&loop, &opts);
    if (r == -ENOSYS || r == -EPERM) return 0;
    cr_assert(r == 0, "tl_loop_new: %s", tl_strerror(r));
    fixture f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < 4; ++i) f.fd[i] = -1;
    int fd = sc->setup(&f);
    cr_assert(fd >= 0, "setup failed: %s", strerror(errno));
    unsigned seen = 0;
    tl_io w;
    tl_io_init(&w, fd, on_io, &seen);
    memset(out, 0, sizeof *out);
    out->start = tl_io_start(loop, &w, sc->events);
    if (out->start == 0) {
        tl_timer t;
        tl_timer_init(&t, on_timer, NULL);
        for (int i = 0; i < sc->steps; ++i) {
            if (sc->step) sc->step(&f, i);
            seen = 0;
            cr_assert(tl_timer_start(loop, &t, 20 * MS, 0) == 0);
            cr_assert(tl_loop_run(loop, TL_RUN_ONCE) >= 0);
            tl_timer_stop(loop, &t);
            out->revents[i] = seen;
        }
        cr_assert(tl_io_stop(loop, &w) == 0);
    }
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    cr_assert(st.io_internal_errors == 0);
    close_all(&f);
    cr_assert(tl_loop_free(loop) == 0);
    return 1;
}

static void compare(const scenario *sc) {
    trace ep, ur;
    cr_assert(run_on(TL_IO_EPOLL, sc, &ep));
    cr_assert(ep.start == sc->expect_start, "epoll: tl_io_start %d (%s), expected %d", ep.start,
              tl_strerror(ep.start), sc->expect_start);
    for (int i = 0; i < sc->steps && ep.start == 0; ++i)
        cr_assert(sc->expect[i] == NONE || ep.revents[i] == sc->expect[i],
                  "epoll step %d: revents %#x, expected %#x", i, ep.revents[i], sc->expect[i]);
    if (!run_on(TL_IO_URING, sc, &ur)) cr_skip_test("io_uring unavailable here");
    cr_assert(ur.start == ep.start, "tl_io_start: io_uring %d (%s), epoll %d (%s)", ur.start,
              tl_strerror(ur.start), ep.start, tl_strerror(ep.start));
    for (int i = 0; i < sc->steps && ep.start == 0; ++i)
        cr_assert(ur.revents[i] == ep.revents[i], "step %d: io_uring revents %#x, epoll %#x", i,
                  ur.revents[i], ep.revents[i]);
}

#define R TL_READ
#define W TL_WRITE
#define E TL_ERROR
#define H TL_HUP

/* ------------------------------------------------------------------------ */
/* UNIX and TCP stream sockets                                              */
/* ------------------------------------------------------------------------ */

static int unix_pair(fixture *f) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, f->fd) < 0) return -1;
    return f->fd[0];
}

static void unix_close_steps(fixture *f, int i) {
    char buf[16];
    switch (i) {
    case 1: /* data */
        cr_assert(write(f->fd[1], "x", 1) == 1);
        break;
    case 2: /* read it */
        cr_assert(read(f->fd[0], buf, sizeof buf) == 1);
        break;
    case 3: /* the peer half-closes */
        cr_assert(shutdown(f->fd[1], SHUT_WR) == 0);
        break;
    case 4: /* and closes */
        close(f->fd[1]);
        f->fd[1] = -1;
        break;
    }
}

Test(io_differential, unix_stream_data_half_close_close) {
    scenario sc = {unix_pair, R | W, 5, unix_close_steps, 0, {W, R | W, W, R | W, R | W | H}};
    compare(&sc);
}

Test(io_differential, unix_stream_read_only_half_close_close) {
    scenario sc = {unix_pair, R, 5, unix_close_steps, 0, {0, R, 0, R, R | H}};
    compare(&sc);
}

static int tcp_listener(int *port) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 8) < 0) return -1;
    getsockname(l, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return l;
}

static int tcp_connect(int port) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) < 0) return -1;
    return c;
}

/* fd[0] server side (watched), fd[1] client, fd[2] listener. */
static int tcp_pair(fixture *f) {
    int port = 0;
    f->fd[2] = tcp_listener(&port);
    if (f->fd[2] < 0) return -1;
    f->fd[1] = tcp_connect(port);
    if (f->fd[1] < 0) return -1;
    await_ready(f->fd[2], POLLIN);
    f->fd[0] = accept4(f->fd[2], NULL, NULL, SOCK_NONBLOCK);
    return f->fd[0];
}

static void tcp_steps(fixture *f, int i) {
    char buf[16];
    switch (i) {
    case 1:
        cr_assert(write(f->fd[1], "x", 1) == 1);
        await_ready(f->fd[0], POLLIN);
        break;
    case 2:
        cr_assert(read(f->fd[0], buf, sizeof buf) == 1);
        break;
    case 3: /* nc -N: the client half-closes after its request */
        cr_assert(shutdown(f->fd[1], SHUT_WR) == 0);
        await_ready(f->fd[0], POLLRDHUP);
        break;
    case 4: /* the reply still goes through */
        cr_assert(write(f->fd[0], "y", 1) == 1);
        cr_assert(read(f->fd[1], buf, 1) == 1);
        break;
    case 5: /* the client closes for good (its FIN went at step 3: nothing
               reaches the server now) */
        close(f->fd[1]);
        f->fd[1] = -1;
        break;
    case 6: /* writing to it draws a reset */
        (void)!write(f->fd[0], "z", 1);
        await_ready(f->fd[0], 0);
        break;
    }
}

Test(io_differential, tcp_data_half_close_close_reset) {
    scenario sc = {tcp_pair, R | W, 7, tcp_steps, 0, {W, R | W, W, R | W, R | W, R | W, NONE}};
    compare(&sc);
}

static void tcp_reset_steps(fixture *f, int i) {
    if (i != 1) return;
    struct linger lg = {1, 0}; /* close() sends RST */
    setsockopt(f->fd[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(f->fd[1]);
    f->fd[1] = -1;
    await_ready(f->fd[0], 0);
}

Test(io_differential, tcp_peer_reset) {
    scenario sc = {tcp_pair, R | W, 3, tcp_reset_steps, 0, {W, NONE, NONE}};
    compare(&sc);
}

static int tcp_refused(fixture *f) {
    int port = 0;
    int l = tcp_listener(&port);
    if (l < 0) return -1;
    close(l); /* nobody listens there now */
    f->fd[0] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(f->fd[0], (struct sockaddr *)&a, sizeof a) == 0 || errno == EINPROGRESS ||
        errno == ECONNREFUSED)
        await_ready(f->fd[0], POLLOUT);
    return f->fd[0];
}

Test(io_differential, tcp_connect_refused) {
    scenario sc = {tcp_refused, R | W, 2, NULL, 0, {NONE, NONE}};
    compare(&sc);
}

static int tcp_listening(fixture *f) {
    int port = 0;
    f->fd[0] = tcp_listener(&port);
    f->fd[3] = port;
    return f->fd[0];
}

static void listening_steps(fixture *f, int i) {
    if (i == 1) {
        f->fd[1] = tcp_connect(f->fd[3]);
        await_ready(f->fd[0], POLLIN);
    }
    if (i == 2) {
        f->fd[2] = accept(f->fd[0], NULL, NULL);
        f->fd[3] = -1;
    }
}

Test(io_differential, tcp_listening_socket) {
    scenario sc = {tcp_listening, R, 3, listening_steps, 0, {0, R, 0}};
    compare(&sc);
}

/* ------------------------------------------------------------------------ */
/* UDP                                                                      */
/* ------------------------------------------------------------------------ */

static int udp_pair(fixture *f) {
    f->fd[0] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    f->fd[1] = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(f->fd[0], (struct sockaddr *)&a, sizeof a) < 0) return -1;
    getsockname(f->fd[0], (struct sockaddr *)&a, &len);
    if (connect(f->fd[1], (struct sockaddr *)&a, sizeof a) < 0) return -1;
    return f->fd[0];
}

static void udp_steps(fixture *f, int i) {
    char buf[16];
    if (i == 1) cr_assert(send(f->fd[1], "x", 1, 0) == 1);
    if (i == 2) cr_assert(recv(f->fd[0], buf, sizeof buf, 0) == 1);
}

Test(io_differential, udp_datagram) {
    scenario sc = {udp_pair, R | W, 3, udp_steps, 0, {W, R | W, W}};
    compare(&sc);
}

/* A connected UDP socket whose peer port is closed: the ICMP error. */
static int udp_refused(fixture *f) {
    int port = 0;
    int l = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bind(l, (struct sockaddr *)&a, sizeof a);
    getsockname(l, (struct sockaddr *)&a, &len);
    port = ntohs(a.sin_port);
    close(l);
    f->fd[0] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    a.sin_port = htons((uint16_t)port);
    if (connect(f->fd[0], (struct sockaddr *)&a, sizeof a) < 0) return -1;
    return f->fd[0];
}

static void udp_refused_steps(fixture *f, int i) {
    if (i == 1) {
        cr_assert(send(f->fd[0], "x", 1, 0) == 1);
        await_ready(f->fd[0], 0); /* the ICMP error */
    }
}

Test(io_differential, udp_error) {
    scenario sc = {udp_refused, R, 2, udp_refused_steps, 0, {0, NONE}};
    compare(&sc);
}

/* ------------------------------------------------------------------------ */
/* Pipes and FIFOs                                                          */
/* ------------------------------------------------------------------------ */

static int pipe_read_end(fixture *f) {
    if (pipe2(f->fd, O_NONBLOCK) < 0) return -1;
    return f->fd[0];
}

static int pipe_write_end(fixture *f) {
    if (pipe2(f->fd, O_NONBLOCK) < 0) return -1;
    return f->fd[1];
}

static void pipe_reader_steps(fixture *f, int i) {
    char buf[16];
    if (i == 1) cr_assert(write(f->fd[1], "x", 1) == 1);
    if (i == 2) cr_assert(read(f->fd[0], buf, sizeof buf) == 1);
    if (i == 3) {
        close(f->fd[1]); /* writer gone */
        f->fd[1] = -1;
    }
}

Test(io_differential, pipe_writer_gone) {
    scenario sc = {pipe_read_end, R, 4, pipe_reader_steps, 0, {0, R, 0, H}};
    compare(&sc);
}

static void pipe_writer_steps(fixture *f, int i) {
    if (i == 1) {
        close(f->fd[0]); /* reader gone */
        f->fd[0] = -1;
    }
}

Test(io_differential, pipe_reader_gone) {
    scenario sc = {pipe_write_end, W, 2, pipe_writer_steps, 0, {W, W | E}};
    compare(&sc);
}

static int fifo_read_end(fixture *f) {
    snprintf(f->dir, sizeof f->dir, "/tmp/tl-diff-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    char path[96];
    snprintf(path, sizeof path, "%s/f", f->dir);
    if (mkfifo(path, 0600) < 0) return -1;
    f->fd[0] = open(path, O_RDONLY | O_NONBLOCK);
    f->fd[1] = open(path, O_WRONLY | O_NONBLOCK);
    return f->fd[1] < 0 ? -1 : f->fd[0];
}

Test(io_differential, fifo_writer_gone) {
    scenario sc = {fifo_read_end, R, 4, pipe_reader_steps, 0, {0, R, 0, H}};
    compare(&sc);
}

/* ------------------------------------------------------------------------ */
/* eventfd, timerfd, signalfd, pidfd, inotify                               */
/* ------------------------------------------------------------------------ */

static int make_eventfd(fixture *f) {
    return f->fd[0] = eventfd(0, EFD_NONBLOCK);
}

static void eventfd_steps(fixture *f, int i) {
    uint64_t v = 1;
    if (i == 1) cr_assert(write(f->fd[0], &v, sizeof v) == sizeof v);
    if (i == 2) cr_assert(read(f->fd[0], &v, sizeof v) == sizeof v);
}

Test(io_differential, eventfd) {
    scenario sc = {make_eventfd, R | W, 3, eventfd_steps, 0, {W, R | W, W}};
    compare(&sc);
}

static int make_timerfd(fixture *f) {
    return f->fd[0] = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
}

static void timerfd_steps(fixture *f, int i) {
    if (i == 1) {
        struct itimerspec its = {{0, 0}, {0, 1000}};
        cr_assert(timerfd_settime(f->fd[0], 0, &its, NULL) == 0);
        await_ready(f->fd[0], POLLIN);
    }
    if (i == 2) {
        uint64_t v;
        cr_assert(read(f->fd[0], &v, sizeof v) == sizeof v);
    }
}

Test(io_differential, timerfd) {
    scenario sc = {make_timerfd, R, 3, timerfd_steps, 0, {0, R, 0}};
    compare(&sc);
}

static int make_signalfd(fixture *f) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    return f->fd[0] = signalfd(-1, &set, SFD_NONBLOCK);
}

static void signalfd_steps(fixture *f, int i) {
    if (i == 1) raise(SIGUSR2);
    if (i == 2) {
        struct signalfd_siginfo info;
        cr_assert(read(f->fd[0], &info, sizeof info) == sizeof info);
    }
}

Test(io_differential, signalfd) {
    scenario sc = {make_signalfd, R, 3, signalfd_steps, 0, {0, R, 0}};
    compare(&sc);
}

/* fd[0] the pidfd, fd[1] the pipe whose closing lets the child exit. */
static int make_pidfd(fixture *f) {
    int p[2];
    if (pipe(p) < 0) return -1;
    f->pid = fork();
    if (f->pid == 0) {
        char c;
        close(p[1]);
        (void)!read(p[0], &c, 1);
        _exit(0);
    }
    close(p[0]);
    f->fd[1] = p[1];
    f->fd[0] = (int)syscall(SYS_pidfd_open, f->pid, 0);
    if (f->fd[0] < 0) cr_skip_test("pidfd_open: %s", strerror(errno));
    return f->fd[0];
}

static void pidfd_steps(fixture *f, int i) {
    if (i == 1) {
        close(f->fd[1]);
        f->fd[1] = -1;
        waitid(P_PID, (id_t)f->pid, NULL, WEXITED | WNOWAIT);
    }
    if (i == 2) {
        waitpid(f->pid, NULL, 0);
        f->pid = 0;
    }
}

Test(io_differential, pidfd_child_exits) {
    scenario sc = {make_pidfd, R, 3, pidfd_steps, 0, {0, R, NONE}};
    compare(&sc);
}

static int make_inotify(fixture *f) {
    snprintf(f->dir, sizeof f->dir, "/tmp/tl-diff-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    f->fd[0] = inotify_init1(IN_NONBLOCK);
    if (f->fd[0] < 0 || inotify_add_watch(f->fd[0], f->dir, IN_CREATE) < 0) return -1;
    return f->fd[0];
}

static void inotify_steps(fixture *f, int i) {
    if (i == 1) {
        char path[96];
        snprintf(path, sizeof path, "%s/f", f->dir);
        int fd = open(path, O_CREAT | O_WRONLY, 0600);
        cr_assert(fd >= 0);
        close(fd);
    }
    if (i == 2) {
        char buf[4096];
        cr_assert(read(f->fd[0], buf, sizeof buf) > 0);
    }
}

Test(io_differential, inotify) {
    scenario sc = {make_inotify, R, 3, inotify_steps, 0, {0, R, 0}};
    compare(&sc);
}

/* ------------------------------------------------------------------------ */
/* A pty                                                                    */
/* ------------------------------------------------------------------------ */

static int make_pty(fixture *f) {
    f->fd[0] = posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (f->fd[0] < 0 || grantpt(f->fd[0]) < 0 || unlockpt(f->fd[0]) < 0) return -1;
    f->fd[1] = open(ptsname(f->fd[0]), O_RDWR | O_NOCTTY | O_NONBLOCK);
    return f->fd[1] < 0 ? -1 : f->fd[0];
}

static void pty_steps(fixture *f, int i) {
    char buf[64];
    if (i == 1) {
        cr_assert(write(f->fd[1], "x", 1) == 1);
        await_ready(f->fd[0], POLLIN); /* the tty layer hands data over from a worker */
    }
    if (i == 2) cr_assert(read(f->fd[0], buf, sizeof buf) >= 1);
    if (i == 3) {
        close(f->fd[1]); /* the terminal side hangs up */
        f->fd[1] = -1;
        await_ready(f->fd[0], POLLIN);
    }
}

Test(io_differential, pty_master) {
    scenario sc = {make_pty, R, 4, pty_steps, 0, {0, R, 0, NONE}};
    compare(&sc);
}

/* ------------------------------------------------------------------------ */
/* Files: what the kernel cannot poll is -EPERM on both                      */
/* ------------------------------------------------------------------------ */

static const char *file_path;
static int open_path(fixture *f) {
    f->fd[0] = open(file_path, O_RDONLY | O_NONBLOCK);
    if (f->fd[0] < 0 && (errno == ENOENT || errno == EACCES))
        cr_skip_test("%s: %s", file_path, strerror(errno));
    return f->fd[0];
}

static int open_regular(fixture *f) {
    snprintf(f->dir, sizeof f->dir, "/tmp/tl-diff-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    char path[96];
    snprintf(path, sizeof path, "%s/f", f->dir);
    return f->fd[0] = open(path, O_CREAT | O_RDWR, 0600);
}

Test(io_differential, dev_null_is_eperm) {
    file_path = "/dev/null";
    scenario sc = {open_path, R, 0, NULL, -EPERM, {0}};
    compare(&sc);
}

Test(io_differential, dev_zero_is_eperm) {
    file_path = "/dev/zero";
    scenario sc = {open_path, R, 0, NULL, -EPERM, {0}};
    compare(&sc);
}

Test(io_differential, dev_urandom_is_eperm) {
    file_path = "/dev/urandom";
    scenario sc = {open_path, R, 0, NULL, -EPERM, {0}};
    compare(&sc);
}

Test(io_differential, regular_file_is_eperm) {
    scenario sc = {open_regular, R | W, 0, NULL, -EPERM, {0}};
    compare(&sc);
}

Test(io_differential, directory_is_eperm) {
    file_path = "/tmp";
    scenario sc = {open_path, R, 0, NULL, -EPERM, {0}};
    compare(&sc);
}

Test(io_differential, procfs_file_without_poll_is_eperm) {
    file_path = "/proc/self/stat";
    scenario sc = {open_path, R, 0, NULL, -EPERM, {0}};
    compare(&sc);
}

Test(io_differential, procfs_file_with_poll) {
    file_path = "/proc/self/mounts";
    scenario sc = {open_path, R, 2, NULL, 0, {R, R}};
    compare(&sc);
}

Test(io_differential, sysfs_file) {
    file_path = "/sys/kernel/mm/transparent_hugepage/enabled";
    scenario sc = {open_path, R, 2, NULL, 0, {NONE, NONE}};
    compare(&sc);
}

Test(io_differential, dev_random_character_device) {
    file_path = "/dev/random";
    scenario sc = {open_path, R, 2, NULL, 0, {NONE, NONE}};
    compare(&sc);
}
