/* SPDX-License-Identifier: MIT */
// Loop overhead per I/O backend, beside the bare kernel calls it is built on.
//
// - empty NOWAIT iteration (one idle watcher keeps the loop alive) vs the
//   bare floors: epoll_wait and epoll_pwait2 with a zero timeout, and
//   io_uring_submit_and_wait_timeout with a zero timeout;
// - an iteration with M ready fds (M = 1, 64: one unread byte each, so
//   level-triggered readiness reports them every time) vs bare epoll_pwait2
//   returning M events;
// - ping-pong: P socketpairs (P = 1, 256) bouncing one byte; items/s are
//   round trips.
// Compare within one run (ratios); the machine is shared and noisy.
#include <benchmark/benchmark.h>
#include <cerrno>
#include <liburing.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <tickloop/tickloop.h>

namespace {

tl_loop *make_loop(tl_io_kind kind, benchmark::State &state) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = kind;
    tl_loop *loop = nullptr;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) state.SkipWithError(tl_strerror(r));
    return loop;
}

struct Pairs {
    std::vector<int> fds; // [2 * i] watched end, [2 * i + 1] peer
    explicit Pairs(int n) : fds(2 * n) {
        for (int i = 0; i < n; ++i)
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, &fds[2 * i]);
    }
    ~Pairs() {
        for (int fd : fds) close(fd);
    }
    int watched(int i) const { return fds[2 * i]; }
    int peer(int i) const { return fds[2 * i + 1]; }
};

void nop_io(tl_loop *, tl_io *, unsigned) {}

/* The loop iteration with M ready fds (M = 0: empty, one idle watcher). */
void BM_LoopNowait(benchmark::State &state, tl_io_kind kind) {
    const int ready = (int)state.range(0);
    tl_loop *loop = make_loop(kind, state);
    if (!loop) return;
    Pairs pairs(ready ? ready : 1);
    std::vector<tl_io> watchers(ready ? ready : 1);
    for (int i = 0; i < (int)watchers.size(); ++i) {
        tl_io_init(&watchers[i], pairs.watched(i), nop_io, nullptr);
        tl_io_start(loop, &watchers[i], TL_READ);
        if (ready && write(pairs.peer(i), "x", 1) != 1) state.SkipWithError("write");
    }
    tl_loop_run(loop, TL_RUN_NOWAIT); /* settle registrations */
    for (auto _ : state) benchmark::DoNotOptimize(tl_loop_run(loop, TL_RUN_NOWAIT));
    state.counters["ns/iter"] = benchmark::Counter(
        (double)state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    for (auto &w : watchers) tl_io_stop(loop, &w);
    tl_loop_free(loop);
}
BENCHMARK_CAPTURE(BM_LoopNowait, epoll, TL_IO_EPOLL)->Arg(0)->Arg(1)->Arg(64);
BENCHMARK_CAPTURE(BM_LoopNowait, io_uring, TL_IO_URING)->Arg(0)->Arg(1)->Arg(64);

/* Floor: epoll_pwait2 with a zero timeout over the same fds. */
/* An epoll set over the watched ends of pairs (one unread byte each when
   ready), as the loop benchmarks register them. */
int bare_epoll_set(benchmark::State &state, Pairs &pairs, int ready) {
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < (ready ? ready : 1); ++i) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = (uint64_t)i;
        epoll_ctl(epfd, EPOLL_CTL_ADD, pairs.watched(i), &ev);
        if (ready && write(pairs.peer(i), "x", 1) != 1) state.SkipWithError("write");
    }
    return epfd;
}

void BM_BareEpollPwait2(benchmark::State &state) {
    const int ready = (int)state.range(0);
    Pairs pairs(ready ? ready : 1);
    int epfd = bare_epoll_set(state, pairs, ready);
    epoll_event events[256];
    timespec zero{0, 0};
    for (auto _ : state) benchmark::DoNotOptimize(epoll_pwait2(epfd, events, 256, &zero, nullptr));
    state.counters["ns/iter"] = benchmark::Counter(
        (double)state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    close(epfd);
}
BENCHMARK(BM_BareEpollPwait2)->Arg(0)->Arg(1)->Arg(64);

/* Floor: epoll_wait with a zero timeout, the cheaper call (no timespec to
   copy and convert), which is what the loop issues for a zero wait. */
void BM_BareEpollWait(benchmark::State &state) {
    const int ready = (int)state.range(0);
    Pairs pairs(ready ? ready : 1);
    int epfd = bare_epoll_set(state, pairs, ready);
    epoll_event events[256];
    for (auto _ : state) benchmark::DoNotOptimize(epoll_wait(epfd, events, 256, 0));
    state.counters["ns/iter"] = benchmark::Counter(
        (double)state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    close(epfd);
}
BENCHMARK(BM_BareEpollWait)->Arg(0)->Arg(1)->Arg(64);

/* Floor: one io_uring_enter with a zero timeout (EXT_ARG), nothing queued. */
void BM_BareUringWaitTimeout(benchmark::State &state) {
    io_uring ring;
    if (io_uring_queue_init(256, &ring, 0) < 0) {
        state.SkipWithError("io_uring unavailable");
        return;
    }
    __kernel_timespec zero{0, 0};
    for (auto _ : state) {
        io_uring_cqe *cqe;
        benchmark::DoNotOptimize(io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &zero, nullptr));
    }
    state.counters["ns/iter"] = benchmark::Counter(
        (double)state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    io_uring_queue_exit(&ring);
}
BENCHMARK(BM_BareUringWaitTimeout);

/* Ping-pong: each watched end echoes a byte back; the peer end is driven by
 * a second watcher on the same loop that sends the next byte. */
struct PingPong {
    tl_io a, b;
    uint64_t *round_trips;
};

void on_echo(tl_loop *, tl_io *w, unsigned) {
    char c;
    if (read(w->fd, &c, 1) == 1 && write(w->fd, &c, 1) != 1) std::abort();
}

void on_return(tl_loop *, tl_io *w, unsigned) {
    auto *pp = static_cast<PingPong *>(w->data);
    char c;
    if (read(w->fd, &c, 1) == 1) {
        ++*pp->round_trips;
        if (write(w->fd, &c, 1) != 1) std::abort();
    }
}

void BM_PingPong(benchmark::State &state, tl_io_kind kind) {
    const int npairs = (int)state.range(0);
    tl_loop *loop = make_loop(kind, state);
    if (!loop) return;
    Pairs pairs(npairs);
    std::vector<PingPong> pp(npairs);
    uint64_t round_trips = 0;
    for (int i = 0; i < npairs; ++i) {
        pp[i].round_trips = &round_trips;
        tl_io_init(&pp[i].a, pairs.watched(i), on_echo, &pp[i]);
        tl_io_init(&pp[i].b, pairs.peer(i), on_return, &pp[i]);
        tl_io_start(loop, &pp[i].a, TL_READ);
        tl_io_start(loop, &pp[i].b, TL_READ);
        if (write(pairs.peer(i), "x", 1) != 1) state.SkipWithError("write");
    }
    for (auto _ : state) tl_loop_run(loop, TL_RUN_ONCE);
    state.counters["round_trips/s"] =
        benchmark::Counter((double)round_trips, benchmark::Counter::kIsRate);
    for (auto &p : pp) {
        tl_io_stop(loop, &p.a);
        tl_io_stop(loop, &p.b);
    }
    tl_loop_free(loop);
}
BENCHMARK_CAPTURE(BM_PingPong, epoll, TL_IO_EPOLL)->Arg(1)->Arg(256);
BENCHMARK_CAPTURE(BM_PingPong, io_uring, TL_IO_URING)->Arg(1)->Arg(256);

} // namespace

BENCHMARK_MAIN();
