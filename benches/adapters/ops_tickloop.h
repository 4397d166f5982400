/* SPDX-License-Identifier: MIT */
/*
 * ops_tickloop.h: the benchmark adapter (see ops.h) for tickloop, one loop per
 * timer backend, selected by tl_loop_options.timers.
 *
 * The loop is created with epoll I/O: the operations measured here never
 * touch the poller except run_nowait(), and epoll is the backend every build
 * has, so the timer backends are compared on equal footing.
 */
#ifndef TICKLOOP_BENCHES_OPS_TICKLOOP_H
#define TICKLOOP_BENCHES_OPS_TICKLOOP_H

#include <cstdint>
#include <cstdlib>
#include <string>

#include <tickloop/timer_backend.h>

namespace bench {

struct TickloopOps {
    using Timer = tl_timer;
    static constexpr uint64_t resolution_ns = 1;

    tl_loop *loop = nullptr;
    std::string backend;
    int err = 0;
    uint64_t fired = 0;

    explicit TickloopOps(const char *timers, tl_io_kind io = TL_IO_EPOLL) : backend(timers) {
        tl_loop_options opts;
        tl_loop_options_init(&opts);
        opts.io = io;
        opts.timers = timers;
        err = tl_loop_new(&loop, &opts);
        if (err) loop = nullptr;
    }
    /* A loop made with every option as given (tick, slack: tickloop-bench's
       rows); backend is the timer backend's name, opts.timers. */
    explicit TickloopOps(const tl_loop_options &opts) : backend(opts.timers ? opts.timers : "") {
        err = tl_loop_new(&loop, &opts);
        if (err) loop = nullptr;
    }
    ~TickloopOps() {
        if (loop) tl_loop_free(loop);
    }
    TickloopOps(const TickloopOps &) = delete;
    TickloopOps &operator=(const TickloopOps &) = delete;

    bool ok() const { return loop != nullptr; }
    std::string error() const { return std::string("tl_loop_new: ") + tl_strerror(err); }
    std::string name() const { return "tickloop " + backend; }

    static void on_timer(tl_loop *, tl_timer *t) { ++static_cast<TickloopOps *>(t->data)->fired; }

    void init(Timer &t) { tl_timer_init(&t, on_timer, this); }
    /* A failed start would silently shrink the population and flatter the
       figures, so it ends the run instead. */
    void start(Timer &t, uint64_t delay_ns) {
        if (tl_timer_start(loop, &t, delay_ns, 0) != 0) std::abort();
    }
    /* tl_timer_start on an active timer reschedules it (the contract's
       heartbeat pattern). */
    void restart(Timer &t, uint64_t delay_ns) { start(t, delay_ns); }
    void stop(Timer &t) { tl_timer_stop(loop, &t); }
    void update_time() { tl_update_time(loop); }
    void run_nowait() { tl_loop_run(loop, TL_RUN_NOWAIT); }
    void run() { tl_loop_run(loop, TL_RUN_DEFAULT); }
    void close(Timer *, size_t) {}
};

} // namespace bench

#endif /* TICKLOOP_BENCHES_OPS_TICKLOOP_H */
