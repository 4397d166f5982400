/* SPDX-License-Identifier: MIT */
/*
 * A loop's life: tl_loop_new (the options resolved by options.cc, the timer
 * backend's instance, the I/O backend), tl_loop_free, tl_loop_fork (the
 * kernel objects a child needs of its own), and the registry of live loops
 * that finds the loop of an active timer by its owner tag.
 */
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <pthread.h>

#include "loop/async.h"
#include "loop/clock.h"
#include "loop/io/backend.h"
#include "loop/io/batch.h"
#include "loop/io/io.h"
#include "loop/lifecycle.h"
#include "loop/signal.h"
#include "loop/slack.h"
#include "loop/state.h"
#include "loop/stream/stream.h"
#include "loop/timer_queue.h"
#include "timers/timers.h"

using namespace tl::detail;

namespace {

std::atomic<uint32_t> next_loop_id{1};

/* Forks this process descends through, counted in each child by a
   pthread_atfork handler registered with the first loop: a loop made under
   another count was inherited (loop_inherited). */
std::atomic<uint32_t> fork_count{0};
pthread_once_t fork_counter_once = PTHREAD_ONCE_INIT;
int fork_counter_error;

void count_fork_in_child() noexcept {
    fork_count.fetch_add(1, std::memory_order_relaxed);
}

void register_fork_counter() noexcept {
    fork_counter_error = -pthread_atfork(nullptr, nullptr, count_fork_in_child);
}

/* The live loops, for loop_by_id (tl_timer_init of an active timer). A
   process has few loops, and the list is read only for a timer that is
   initialised while active, so a locked array is enough. */
pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
tl_loop **live_loops;
size_t live_count, live_cap;

int live_add(tl_loop *loop) noexcept {
    pthread_mutex_lock(&live_lock);
    if (live_count == live_cap) {
        size_t cap = live_cap ? live_cap * 2 : 8;
        void *mem = std::realloc(live_loops, cap * sizeof *live_loops);
        if (!mem) {
            pthread_mutex_unlock(&live_lock);
            return -ENOMEM;
        }
        live_loops = static_cast<tl_loop **>(mem);
        live_cap = cap;
    }
    live_loops[live_count++] = loop;
    pthread_mutex_unlock(&live_lock);
    return 0;
}

void live_remove(tl_loop *loop) noexcept {
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < live_count; ++i)
        if (live_loops[i] == loop) {
            live_loops[i] = live_loops[--live_count];
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

/* An explicit kind fails with the kernel's answer and never switches
 * silently; AUTO prefers io_uring and falls back to epoll when io_uring is
 * missing, refused (seccomp, kernel.io_uring_disabled) or too old. */
int open_io(tl_loop *loop, tl_io_kind kind, IoBackend **out) noexcept {
    switch (kind) {
    case TL_IO_URING:
        return uring_backend_create(loop, out);
    case TL_IO_EPOLL:
        return epoll_backend_create(loop, out);
    case TL_IO_AUTO:
        if (uring_backend_create(loop, out) == 0) return 0;
        return epoll_backend_create(loop, out);
    }
    return -EINVAL;
}

/* The streams' path and the I/O batching follow what the backend just
   created offers. */
int create_io(tl_loop *loop, tl_io_kind kind, IoBackend **out) noexcept {
    int r = open_io(loop, kind, out);
    if (r < 0) return r;
    streams_choose_path(loop, *out);
    batch_configure(loop, *out);
    return 0;
}

} // namespace

tl_loop *tl::detail::loop_by_id(uint32_t id) noexcept {
    tl_loop *found = nullptr;
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < live_count; ++i)
        if (live_loops[i]->id == id) {
            found = live_loops[i];
            break;
        }
    pthread_mutex_unlock(&live_lock);
    return found;
}

bool tl::detail::loop_inherited(const tl_loop *loop) noexcept {
    return loop->fork_gen != fork_count.load(std::memory_order_relaxed);
}

namespace {

/* The loop's timers as the options and their resolution say; on failure
   nothing is left open and the error is the one tl_loop_new reports. */
int open_timers(tl_loop *loop, const tl_loop_options *opts, const LoopSettings &settings) {
    const tl_timer_backend *backend = settings.timers;
    tl_timer_config cfg = timer_config(opts->tick_ns, opts->wheel_slots);
    int r = timers_open(loop, backend, cfg, settings.collect_flags, opts->max_timers,
                        settings.max_timers_per_iteration);
    if (r == 0) return 0;
    timers_close(loop);
    /* The backend refuses the configuration (a wheel larger than it allows)
       if it can be created with the defaults. */
    tl_timer_config defaults = timer_config(0, 0);
    if (void *probe = backend->create(&defaults, 0)) {
        backend->destroy(probe);
        return fail_new(-EINVAL,
                        "timer backend '%.64s' refuses tl_loop_options.tick_ns %llu with "
                        "wheel_slots %u",
                        settings.timers_name, (unsigned long long)cfg.tick_ns, cfg.wheel_slots);
    }
    return fail_new(-ENOMEM, "timer backend '%.64s': out of memory", settings.timers_name);
}

/* The loop's I/O backend of the kind asked for, and the loop in the list of
   live ones; on failure neither, and the error reported. */
int open_io(tl_loop *loop, const tl_loop_options *opts, tl_io_kind kind) {
    int r = create_io(loop, kind, &loop->io);
    if (r < 0 && kind == TL_IO_AUTO)
        return fail_new(r, "no I/O backend could be created (epoll: %s)", tl_strerror(r));
    if (r < 0)
        return fail_new(
            r, "the %s I/O backend (%s): %s", kind == TL_IO_EPOLL ? "epoll" : "io_uring",
            opts->io != TL_IO_AUTO ? "tl_loop_options.io" : "environment variable TICKLOOP_IO",
            tl_strerror(r));
    r = live_add(loop);
    if (r < 0) {
        delete loop->io;
        return fail_new(r, "out of memory for the loop");
    }
    return 0;
}

} // namespace

extern "C" {

TL_API int tl_loop_new(tl_loop **out, const tl_loop_options *opts) {
    clear_new_error();
    if (!out) return fail_new(-EINVAL, "out is NULL");
    *out = nullptr;
    tl_loop_options defaults;
    tl_loop_options_init(&defaults);
    if (!opts) opts = &defaults;
    LoopSettings settings;
    int r = resolve_options(opts, &settings);
    if (r < 0) return r;
    pthread_once(&fork_counter_once, register_fork_counter);
    if (fork_counter_error) return fail_new(fork_counter_error, "pthread_atfork failed");
    tl_loop *loop = static_cast<tl_loop *>(std::calloc(1, sizeof(tl_loop)));
    if (!loop) return fail_new(-ENOMEM, "out of memory for the loop");
    loop->fork_gen = fork_count.load(std::memory_order_relaxed);
    loop->id = next_loop_id.fetch_add(1, std::memory_order_relaxed);
    if (loop->id == 0) loop->id = next_loop_id.fetch_add(1, std::memory_order_relaxed);
    loop->timer_slack_ns = opts->timer_slack_ns;
    loop->batch.bound_ns = settings.io_batch_ns;
    loop->batch.adaptive = settings.io_batch_adaptive;
    loop->async_fd = -1;
    loop->signal_fd = -1;
    sigemptyset(&loop->signal_mask);
    r = streams_configure(loop, opts);
    if (r < 0) {
        std::free(loop);
        return fail_new(r,
                        "tl_loop_options.read_buffer_size %u / read_buffer_count %u: a size is a "
                        "power of two from 256 to 16 MiB, a count a power of two up to 32768",
                        opts->read_buffer_size, opts->read_buffer_count);
    }

    r = open_timers(loop, opts, settings);
    if (r < 0) {
        std::free(loop);
        return r;
    }
    r = open_io(loop, opts, settings.io);
    if (r < 0) {
        timers_close(loop);
        std::free(loop);
        return r;
    }
    /* What AUTO chose, so that tl_loop_fork re-creates the same kind. */
    loop->io_kind = loop->io->kind();
    /* The time a first tl_timer_start counts from is the loop's as it is
       handed out, not as it was before the I/O backend's setup (an io_uring
       ring with its probes takes milliseconds on a loaded machine). */
    update_time(loop);
    *out = loop;
    return 0;
}

TL_API int tl_loop_free(tl_loop *loop) {
    if (!loop) return -EINVAL;
    /* Unreferenced handles too: the loop still points at them. */
    if (loop->active_handles || loop->running) return -EBUSY;
    live_remove(loop);
    release_timer_slack(loop);
    async_close(loop);
    signal_close(loop);
    clock_close(loop);
    streams_close(loop);
    io_close(loop);
    delete loop->io;
    timers_close(loop);
    std::free(loop);
    return 0;
}

TL_API int tl_loop_fork(tl_loop *loop) {
    if (!loop) return -EINVAL;
    if (loop->running) return -EBUSY;
    /* Its signals first, so that a conflict with a loop the child created
       fails with nothing changed. */
    sigset_t taken;
    int r = signal_retake(loop, &taken);
    if (r < 0) return r;
    IoBackend *fresh;
    r = create_io(loop, loop->io_kind, &fresh);
    if (r < 0) {
        signal_release(loop, &taken);
        return r;
    }
    /* The loop's own descriptors first: they change the fd registry. */
    r = async_fork(loop);
    if (r == 0) r = signal_fork(loop);
    if (r == 0) r = clock_fork(loop);
    /* Every registration again, with its tag (fd, generation) unchanged, so
       the watchers see no difference (io_readd_all: the routine epoll also
       uses to rebuild its set). A watcher whose fd the program closed
       without stopping it is skipped: epoll had silently dropped it too. */
    if (r == 0) r = io_readd_all(loop, fresh);
    if (r < 0) {
        delete fresh;
        signal_release(loop, &taken);
        return r;
    }
    /* Closes the inherited epoll descriptor or unmaps the inherited ring in
       this process only; the parent's stays as it was. A kernel object the
       loop gains later needs a step of its own above, as the clocks'
       timerfds have. */
    delete loop->io;
    loop->io = fresh;
    loop->fork_gen = fork_count.load(std::memory_order_relaxed);
    return 0;
}

} // extern "C"
