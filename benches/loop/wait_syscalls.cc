/* SPDX-License-Identifier: MIT */
/*
 * bench-wait-syscalls: one loop pattern per run, for `strace -c -f` (how many
 * syscalls an iteration makes) and for ns per iteration.
 *
 *   restart  an always-readable eventfd wakes every iteration, and its
 *            callback restarts the loop's earliest timer (1 s away): the
 *            heartbeat pattern, where the earliest deadline moves later on
 *            every iteration;
 *   nowait   empty TL_RUN_NOWAIT iterations (one idle timer keeps the loop
 *            alive);
 *   timer    a repeating 100 us timer, one timed wait per iteration;
 *   expire   <iterations> timers due within 20 ms, fired by TL_RUN_NOWAIT
 *            iterations after a 25 ms sleep (the expiry path, for
 *            callgrind: --toggle-collect=tl_loop_run counts only that).
 *
 * Usage: bench-wait-syscalls restart|nowait|timer [epoll|io_uring]
 *        [iterations] [timer backend]
 * Prints "<mode> <io> <timers>: <n> iterations, <ns> ns/iteration".
 * Uses only the public API, so it also builds against an older library for a
 * before/after comparison.
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/eventfd.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

namespace {

uint64_t mono_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct Restart {
    tl_timer heartbeat;
    uint64_t left;
};

void on_never(tl_loop *, tl_timer *) {}

void on_ready(tl_loop *loop, tl_io *w, unsigned) {
    auto *r = static_cast<Restart *>(w->data);
    tl_timer_start(loop, &r->heartbeat, 1000000000u, 0);
    if (--r->left == 0) tl_loop_stop(loop);
}

void on_tick(tl_loop *loop, tl_timer *t) {
    auto *left = static_cast<uint64_t *>(t->data);
    if (--*left == 0) tl_timer_stop(loop, t);
}

void on_expire(tl_loop *, tl_timer *t) {
    ++*static_cast<uint64_t *>(t->data);
}

int fail(const char *what, int r) {
    std::fprintf(stderr, "bench-wait-syscalls: %s: %s\n", what, tl_strerror(r));
    return 1;
}

} // namespace

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "restart";
    const char *io = argc > 2 ? argv[2] : "epoll";
    uint64_t n = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 100000;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = std::strcmp(io, "io_uring") == 0 ? TL_IO_URING : TL_IO_EPOLL;
    opts.timers = argc > 4 ? argv[4] : "heap4";
    if (n == 0) n = 1;
    tl_loop *loop;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) return fail("tl_loop_new", r);

    uint64_t t0 = 0, t1 = 0;
    if (std::strcmp(mode, "restart") == 0) {
        int efd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK); /* readable, never read */
        if (efd < 0) return fail("eventfd", -errno);
        Restart rs;
        rs.left = n;
        tl_timer_init(&rs.heartbeat, on_never, nullptr);
        tl_timer_start(loop, &rs.heartbeat, 1000000000u, 0);
        tl_io w;
        tl_io_init(&w, efd, on_ready, &rs);
        if ((r = tl_io_start(loop, &w, TL_READ)) < 0) return fail("tl_io_start", r);
        t0 = mono_ns();
        r = tl_loop_run(loop, TL_RUN_DEFAULT);
        t1 = mono_ns();
        tl_io_stop(loop, &w);
        tl_timer_stop(loop, &rs.heartbeat);
        close(efd);
    } else if (std::strcmp(mode, "nowait") == 0) {
        tl_timer idle;
        tl_timer_init(&idle, on_never, nullptr);
        tl_timer_start(loop, &idle, 3600000000000u, 0);
        t0 = mono_ns();
        for (uint64_t i = 0; i < n && r >= 0; ++i) r = tl_loop_run(loop, TL_RUN_NOWAIT);
        t1 = mono_ns();
        tl_timer_stop(loop, &idle);
    } else if (std::strcmp(mode, "timer") == 0) {
        tl_timer tick;
        uint64_t left = n;
        tl_timer_init(&tick, on_tick, &left);
        tl_timer_start(loop, &tick, 100000, 100000);
        t0 = mono_ns();
        r = tl_loop_run(loop, TL_RUN_DEFAULT);
        t1 = mono_ns();
    } else if (std::strcmp(mode, "expire") == 0) {
        tl_timer *timers = static_cast<tl_timer *>(std::calloc(n, sizeof(tl_timer)));
        if (!timers) return fail("calloc", -ENOMEM);
        uint64_t fired = 0, x = 88172645463325252ull; /* xorshift: same delays every run */
        for (uint64_t i = 0; i < n; ++i) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            tl_timer_init(&timers[i], on_expire, &fired);
            tl_timer_start(loop, &timers[i], x % 20000000u, 0);
        }
        struct timespec nap = {0, 25000000};
        nanosleep(&nap, nullptr);
        t0 = mono_ns();
        while (fired < n && r >= 0) r = tl_loop_run(loop, TL_RUN_NOWAIT);
        t1 = mono_ns();
        std::free(timers);
    } else {
        std::fprintf(stderr,
                     "usage: %s restart|nowait|timer|expire [epoll|io_uring] [iterations] "
                     "[timer backend]\n",
                     argv[0]);
        return 2;
    }
    if (r < 0) return fail("tl_loop_run", r);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    std::printf("%s %s %s: %llu iterations, %.1f ns/iteration, %llu timers fired, %.1f ns/timer\n",
                mode, tl_loop_io_name(loop), tl_loop_timers_name(loop),
                (unsigned long long)st.iterations,
                (double)(t1 - t0) / (double)(st.iterations ? st.iterations : 1),
                (unsigned long long)st.timers_fired,
                st.timers_fired ? (double)(t1 - t0) / (double)st.timers_fired : 0.0);
    tl_loop_free(loop);
    return 0;
}
