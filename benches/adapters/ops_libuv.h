/* SPDX-License-Identifier: MIT */
/*
 * ops_libuv.h: the benchmark adapter (see ops.h) for libuv.
 *
 * libuv timers take whole milliseconds, so delays are rounded up to the next
 * millisecond (never shorter than asked). Restart is uv_timer_start on an
 * active handle, which libuv documents as stop + start.
 */
#ifndef TICKLOOP_BENCHES_OPS_LIBUV_H
#define TICKLOOP_BENCHES_OPS_LIBUV_H

#include <cstdint>
#include <string>

#include <uv.h>

#include "latency.h"
#include "ops.h"

namespace bench {

struct LibuvOps {
    using Timer = uv_timer_t;
    static constexpr uint64_t resolution_ns = 1000000;

    uv_loop_t loop;
    int err;
    uint64_t fired = 0;

    explicit LibuvOps(const char * = nullptr) : err(uv_loop_init(&loop)) {}
    ~LibuvOps() {
        if (!err) uv_loop_close(&loop);
    }
    LibuvOps(const LibuvOps &) = delete;
    LibuvOps &operator=(const LibuvOps &) = delete;

    bool ok() const { return err == 0; }
    std::string error() const { return std::string("uv_loop_init: ") + uv_strerror(err); }
    static std::string version() { return uv_version_string(); }
    std::string name() const { return "libuv " + version(); }

    static uint64_t to_ms(uint64_t ns) { return (ns + resolution_ns - 1) / resolution_ns; }
    static void on_timer(uv_timer_t *t) { ++static_cast<LibuvOps *>(t->data)->fired; }

    void init(Timer &t) {
        uv_timer_init(&loop, &t);
        t.data = this;
    }
    void start(Timer &t, uint64_t delay_ns) { uv_timer_start(&t, on_timer, to_ms(delay_ns), 0); }
    void restart(Timer &t, uint64_t delay_ns) { start(t, delay_ns); }
    void stop(Timer &t) { uv_timer_stop(&t); }
    void update_time() { uv_update_time(&loop); }
    void run_nowait() { uv_run(&loop, UV_RUN_NOWAIT); }
    void run() { uv_run(&loop, UV_RUN_DEFAULT); }
    /* uv_loop_close refuses while handles are open; closing is asynchronous,
       finished by one more turn of the loop (NOWAIT: other timers of the loop
       may still be active and must not be waited for). */
    void close(Timer *timers, size_t n) {
        for (size_t i = 0; i < n; ++i) close_handle(timers[i]);
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    /* One handle, for handles not laid out in an array; close(nullptr, 0)
       then finishes them. */
    void close_handle(Timer &t) { uv_close(reinterpret_cast<uv_handle_t *>(&t), nullptr); }

    /* Latency rows (ops.h). */
    static void on_fire(uv_timer_t *t) {
        uint64_t now = mono_ns(); /* first: the library's own work is not ours */
        static_cast<FireSink *>(t->data)->fire(now);
    }
    void init_fire(Timer &t, FireSink *sink) {
        uv_timer_init(&loop, &t);
        t.data = sink;
    }
    /* libuv's deadline: its cached loop time plus the timeout, in whole ms of
       CLOCK_MONOTONIC (coarse or not, the same time base). */
    uint64_t arm(Timer &t, uint64_t delay_ns) {
        uv_timer_start(&t, on_fire, to_ms(delay_ns), 0);
        return (uv_now(&loop) + uv_timer_get_due_in(&t)) * resolution_ns;
    }
    std::string latency_note() const { return "delays rounded up to whole ms; "; }
};

} // namespace bench

#endif /* TICKLOOP_BENCHES_OPS_LIBUV_H */
