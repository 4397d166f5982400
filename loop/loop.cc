/* SPDX-License-Identifier: MIT */
/*
 * The reactor: loop creation, the run loop, the time cache and introspection.
 *
 * One iteration:
 *   1. run the IDLE hooks, then the PREPARE hooks (hook.cc);
 *   2. timeout = 0 (NOWAIT, stop requested, an IDLE hook active, nothing
 *      referenced left, a timer already due) or the time to the timer
 *      backend's next_expiry, or "forever" with no timer;
 *   3. wait in the I/O backend until the absolute deadline (now + timeout),
 *      with no slack; EINTR re-waits for the same deadline;
 *   4. read the clock once into the cached `now`;
 *   5. run every due timer, then the I/O callbacks of the events collected;
 *   6. run the CHECK hooks.
 * Timers go first so that one due while I/O was being collected is not held
 * behind a long batch of I/O callbacks. The timeout is computed after the
 * hooks, which may start or stop timers.
 *
 * Also here: embedding (tl_loop_fd/tl_loop_timeout) and tl_loop_fork.
 */
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/prctl.h>
#include <type_traits>
#include <unistd.h>

#include "loop_internal.h"
#include "timers/timers.h"

using namespace tl::detail;

namespace {

/* Why the last tl_loop_new on this thread failed (tl_loop_new_error), as
   dlerror keeps its message: per thread, so that concurrent creations do not
   see each other's. Empty: the last call succeeded, or none was made. */
thread_local char new_error[256];

[[gnu::format(printf, 2, 3)]] int fail_new(int err, const char *fmt, ...) noexcept {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(new_error, sizeof new_error, fmt, ap);
    va_end(ap);
    return err;
}

/* The registered timer backends' names, ", "-separated, for a message. */
void backend_names(char *buf, size_t cap) noexcept {
    const char *names[64];
    size_t n = tl_timer_backend_names(names, 64);
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && i < 64 && len < cap; ++i) {
        int w = std::snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", names[i]);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* The default backend until the benchmarks say otherwise (README). */
constexpr const char *kDefaultTimers = "heap4";
/* Timer callbacks per iteration before I/O gets its turn. A storm of due
 * timers then delays a ready socket by at most this many callbacks, while a
 * batch stays large enough that the per-iteration cost (one wait syscall,
 * under 1 us) is noise beside it (Netty bounds its expiry batch the same
 * way). Measured with 1e6 timers due at once (tests/reliability/faults.c):
 * a heap pops one in 1-3 us at that size, so 65536 let a ready socket wait
 * 180-220 ms; 8192 bounds it near 25 ms, for about 120 extra waits. */
constexpr uint32_t kDefaultMaxTimersPerIteration = 8192;

/* The largest timer_slack_ns accepted. Slack lets every wait of the thread
 * end that much late; past a second no loop wants it (UINT64_MAX made a 10 ms
 * wait last seconds), and PR_GET_TIMERSLACK, which returns an int, could not
 * even read back more than 2.1 s. */
constexpr uint64_t kMaxTimerSlackNs = 1000000000;

/* The largest collect_interval_ns accepted: a loop-wide second of lateness
 * is a unit mistake more often than a wish; a timer that may wait longer
 * says so with its own leeway. */
constexpr uint64_t kMaxCollectIntervalNs = 1000000000;

std::atomic<uint32_t> next_loop_id{1};

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

/* The thread's timer slack as the loops running on it left it. Slack belongs
 * to the thread, so this is per thread: `loops` counts the loops with a
 * timer_slack_ns that ran here and are not freed, `saved` is the slack the
 * thread had before the first of them, `current` the value last set (0:
 * none), so a run whose loop wants what is already set makes no syscall. */
struct ThreadSlack {
    uint64_t current;
    uint64_t saved;
    uint32_t loops;
};
thread_local ThreadSlack thread_slack;

/* At the start of a run: one prctl when this loop's slack differs from the
 * thread's current one (the first run, or another loop ran in between). */
void apply_timer_slack(tl_loop *loop) noexcept {
    if (!loop->timer_slack_ns) return;
    pthread_t self = pthread_self();
    if (!loop->slack_applied || !pthread_equal(loop->slack_thread, self)) {
        /* Moved to another thread: that thread keeps the slack the loop set
           (its thread-local state cannot be reached from here). */
        if (thread_slack.loops++ == 0) {
            int old = prctl(PR_GET_TIMERSLACK);
            thread_slack.saved = old > 0 ? (uint64_t)old : 0;
            thread_slack.current = 0;
        }
        loop->slack_applied = true;
        loop->slack_thread = self;
    }
    if (thread_slack.current == loop->timer_slack_ns) return;
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)loop->timer_slack_ns) == 0)
        thread_slack.current = loop->timer_slack_ns;
}

/* When a loop is freed on the thread it set the slack of: the last such loop
 * gives the thread back the slack it had (0 restores the default). */
void release_timer_slack(tl_loop *loop) noexcept {
    if (!loop->slack_applied || !pthread_equal(loop->slack_thread, pthread_self())) return;
    if (--thread_slack.loops > 0) return;
    prctl(PR_SET_TIMERSLACK, (unsigned long)thread_slack.saved);
    thread_slack.current = 0;
}

/* The loop's MONOTONIC time, fresh (clock.cc: the test seam may supply it). */
uint64_t clock_now(const tl_loop *loop) noexcept {
    return read_clock(loop, TL_CLOCK_MONOTONIC);
}

/* TL_IO_AUTO defers to TICKLOOP_IO; anything else there is a mistake worth
 * reporting rather than guessing. */
int resolve_io_kind(const tl_loop_options *opts, tl_io_kind *out) noexcept {
    /* C may store any int in the enum; reading it as the C++ enum type would
       be undefined for out-of-range values, so check the raw integer. */
    std::underlying_type_t<tl_io_kind> raw;
    std::memcpy(&raw, &opts->io, sizeof raw);
    if (raw != TL_IO_AUTO && raw != TL_IO_EPOLL && raw != TL_IO_URING)
        return fail_new(-EINVAL,
                        "tl_loop_options.io is %d: not TL_IO_AUTO, TL_IO_EPOLL or TL_IO_URING",
                        (int)raw);
    tl_io_kind requested = static_cast<tl_io_kind>(raw);
    *out = requested;
    if (requested != TL_IO_AUTO) return 0;
    const char *env = std::getenv("TICKLOOP_IO");
    if (!env || !*env || std::strcmp(env, "auto") == 0) return 0;
    if (std::strcmp(env, "epoll") == 0)
        *out = TL_IO_EPOLL;
    else if (std::strcmp(env, "io_uring") == 0)
        *out = TL_IO_URING;
    else
        return fail_new(-EINVAL,
                        "environment variable TICKLOOP_IO='%.64s': not 'epoll', "
                        "'io_uring' or 'auto' (the values are lower-case)",
                        env);
    return 0;
}

/* An explicit kind fails with the kernel's answer and never switches
 * silently; AUTO prefers io_uring and falls back to epoll when io_uring is
 * missing, refused (seccomp, kernel.io_uring_disabled) or too old. */
int create_io(tl_loop *loop, tl_io_kind kind, IoBackend **out) noexcept {
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

bool is_power_of_two(uint32_t v) noexcept {
    return v && !(v & (v - 1));
}

/* A referenced handle is active: tl_loop_run(DEFAULT) goes on. */
bool alive(const tl_loop *loop) noexcept {
    return loop->active_handles > loop->unref_active;
}

/* Time from `now` to the next MONOTONIC wake-up (the earliest deadline, or
   with leeway the latest time that keeps every window: timers_wakeup); 0 if
   one is due, UINT64_MAX if none. */
uint64_t timer_timeout(const tl_loop *loop, uint64_t now) noexcept {
    uint64_t next = timers_wakeup(loop->timer_backend, loop->timers);
    if (next == UINT64_MAX) return UINT64_MAX;
    return next > now ? next - now : 0;
}

/* How long the next wait may block, in ns; UINT64_MAX for no limit. Not at
   all while an IDLE hook wants the next iteration, nor when the hooks just
   stopped the last referenced handle (blocking then could be forever, and
   the run is about to end: libuv's uv__backend_timeout does the same). */
uint64_t wait_timeout(tl_loop *loop, tl_run_mode mode) noexcept {
    if (mode == TL_RUN_NOWAIT || loop->stopping || loop->idle_hooks || !alive(loop)) return 0;
    if (streams_pending(loop)) return 0; /* stream callbacks due: do not sleep */
    /* The other clocks' timerfds are armed here; one of them due now makes
       the wait not block. */
    if (loop->clocks[TL_CLOCK_BOOTTIME].timers || loop->clocks[TL_CLOCK_REALTIME].timers)
        if (clocks_timeout(loop) == 0) return 0;
    return timer_timeout(loop, loop->now);
}

/* One iteration; returns 0 or a negative errno from the wait. */
int iterate(tl_loop *loop, tl_run_mode mode) noexcept {
    /* An IDLE hook that ran this iteration makes it non-blocking even if it
       stopped itself: it was promised an iteration that does not sleep. */
    const bool idled = loop->idle_hooks != 0;
    hooks_run(loop, TL_HOOK_IDLE);
    hooks_run(loop, TL_HOOK_PREPARE);
    uint64_t timeout = idled ? 0 : wait_timeout(loop, mode);
    /* The backends wait for the deadline itself (0: do not block). */
    uint64_t deadline = timeout == 0 ? 0 : sat_add(loop->now, timeout);
    int n;
    do {
        /* A signal handler interrupted the wait: wait out the same deadline. */
        n = loop->io->wait(deadline, loop->events, kMaxEvents);
    } while (n == -EINTR);
    if (n < 0) return n;
    loop->now = clock_now(loop);
    uint64_t ran = timers_dispatch(loop);
    if (ran) {
        ++loop->stats.timer_wakeups;
        if (ran > loop->stats.max_timers_per_wakeup) loop->stats.max_timers_per_wakeup = ran;
    }
    ran += io_dispatch(loop, n);
    ran += streams_run_pending(loop);
    hooks_run(loop, TL_HOOK_CHECK);
    TL_DEBUG_VERIFY(loop, "loop iteration");
    ++loop->stats.iterations;
    if (ran == 0 && timeout != 0) ++loop->stats.empty_wakeups;
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

#ifndef NDEBUG
void tl::detail::check_loop_thread(const tl_loop *loop, const char *call) noexcept {
    if (!loop->running || pthread_equal(loop->run_thread, pthread_self())) return;
    std::fprintf(stderr,
                 "tickloop: %s() called from a thread other than the one running the loop; "
                 "a loop belongs to one thread (use tl_async_send from others)\n",
                 call);
    std::abort();
}
#endif

extern "C" {

TL_API void tl_loop_options_init(tl_loop_options *opts) {
    if (opts) std::memset(opts, 0, sizeof *opts);
}

TL_API int tl_loop_new(tl_loop **out, const tl_loop_options *opts) {
    new_error[0] = 0;
    if (!out) return fail_new(-EINVAL, "out is NULL");
    *out = nullptr;
    tl_loop_options defaults;
    tl_loop_options_init(&defaults);
    if (!opts) opts = &defaults;

    /* Reserved words are where later fields go (docs/abi.md): refusing
       non-zero ones now keeps a program that skips tl_loop_options_init()
       from handing garbage to a field a later version adds. */
    for (size_t i = 0; i < sizeof opts->reserved / sizeof opts->reserved[0]; ++i)
        if (opts->reserved[i] != 0)
            return fail_new(-EINVAL,
                            "tl_loop_options.reserved[%zu] is not zero (start from "
                            "tl_loop_options_init)",
                            i);

    tl_io_kind kind;
    int r = resolve_io_kind(opts, &kind);
    if (r < 0) return r;
    if (opts->wheel_slots && !is_power_of_two(opts->wheel_slots))
        return fail_new(-EINVAL, "tl_loop_options.wheel_slots is %u: not a power of two",
                        opts->wheel_slots);
    if (opts->timer_slack_ns > kMaxTimerSlackNs)
        return fail_new(-EINVAL, "tl_loop_options.timer_slack_ns is %llu: above 1 s (1000000000)",
                        (unsigned long long)opts->timer_slack_ns);
    if (opts->collect_interval_ns > kMaxCollectIntervalNs)
        return fail_new(-EINVAL,
                        "tl_loop_options.collect_interval_ns is %llu: above 1 s (1000000000)",
                        (unsigned long long)opts->collect_interval_ns);

    /* An explicit name must name a backend; an empty environment variable
       means "unset", as shells treat it. */
    const char *name = opts->timers;
    const char *from = "tl_loop_options.timers";
    if (!name) {
        name = std::getenv("TICKLOOP_TIMERS");
        from = "environment variable TICKLOOP_TIMERS";
        if (!name || !*name) name = kDefaultTimers;
    }
    const tl_timer_backend *backend = tl_timer_backend_find(name);
    if (!backend) {
        char names[160];
        backend_names(names, sizeof names);
        return fail_new(-ENOENT, "%s: unknown timer backend '%.64s'; registered: %s", from, name,
                        names);
    }

    tl_loop *loop = static_cast<tl_loop *>(std::calloc(1, sizeof(tl_loop)));
    if (!loop) return fail_new(-ENOMEM, "out of memory for the loop");
    loop->now = clock_now(loop);
    loop->id = next_loop_id.fetch_add(1, std::memory_order_relaxed);
    if (loop->id == 0) loop->id = next_loop_id.fetch_add(1, std::memory_order_relaxed);
    loop->max_timers = opts->max_timers;
    loop->max_timers_per_iteration = opts->max_timers_per_iteration ? opts->max_timers_per_iteration
                                                                    : kDefaultMaxTimersPerIteration;
    loop->timer_slack_ns = opts->timer_slack_ns;
    loop->collect_flags =
        opts->collect_interval_ns ? leeway_bits(opts->collect_interval_ns) | TIMER_LOOP_LEEWAY : 0;
    loop->async_fd = -1;
    loop->signal_fd = -1;
    for (tl_loop::ClockState &cs : loop->clocks) cs.fd = -1;
    sigemptyset(&loop->signal_mask);
    r = streams_configure(loop, opts);
    if (r < 0) {
        std::free(loop);
        return fail_new(r,
                        "tl_loop_options.read_buffer_size %u / read_buffer_count %u: a size is a "
                        "power of two from 256 to 16 MiB, a count a power of two up to 32768",
                        opts->read_buffer_size, opts->read_buffer_count);
    }

    tl_timer_config cfg = timer_config(opts->tick_ns, opts->wheel_slots);
    loop->timer_backend = backend;
    loop->timer_config = cfg;
    loop->timers = backend->create(&cfg, loop->now);
    if (!loop->timers) {
        std::free(loop);
        /* The backend refuses the configuration (a wheel larger than it
           allows) if it can be created with the defaults. */
        tl_timer_config defaults = timer_config(0, 0);
        if (void *probe = backend->create(&defaults, 0)) {
            backend->destroy(probe);
            return fail_new(-EINVAL,
                            "timer backend '%.64s' refuses tl_loop_options.tick_ns %llu with "
                            "wheel_slots %u",
                            name, (unsigned long long)cfg.tick_ns, cfg.wheel_slots);
        }
        return fail_new(-ENOMEM, "timer backend '%.64s': out of memory", name);
    }
    r = create_io(loop, kind, &loop->io);
    if (r < 0 && kind == TL_IO_AUTO)
        fail_new(r, "no I/O backend could be created (epoll: %s)", tl_strerror(r));
    else if (r < 0)
        fail_new(r, "the %s I/O backend (%s): %s", kind == TL_IO_EPOLL ? "epoll" : "io_uring",
                 opts->io != TL_IO_AUTO ? "tl_loop_options.io" : "environment variable TICKLOOP_IO",
                 tl_strerror(r));
    if (r == 0) {
        r = live_add(loop);
        if (r < 0) {
            fail_new(r, "out of memory for the loop");
            delete loop->io;
        }
    }
    if (r < 0) {
        backend->destroy(loop->timers);
        std::free(loop);
        return r;
    }
    /* What AUTO chose, so that tl_loop_fork re-creates the same kind. */
    loop->io_kind = loop->io->kind();
    *out = loop;
    return 0;
}

TL_API const char *tl_loop_new_error(void) {
    return new_error[0] ? new_error : nullptr;
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
    loop->timer_backend->destroy(loop->timers);
    std::free(loop);
    return 0;
}

TL_API int tl_loop_run(tl_loop *loop, tl_run_mode mode) {
    if (!loop) return -EINVAL;
    if (mode != TL_RUN_DEFAULT && mode != TL_RUN_ONCE && mode != TL_RUN_NOWAIT) return -EINVAL;
    if (loop->running) return -EBUSY;
    loop->running = true;
    loop->run_thread = pthread_self();
    apply_timer_slack(loop);
    /* The first wait's timeout needs the time now (a stale one would make it
       too long). A NOWAIT run does not wait: the read after its poll is the
       iteration's one clock read; without an iteration (nothing active, or
       a stop already requested) it reads the clock here, so that every mode
       leaves tl_now() fresh. */
    if (mode != TL_RUN_NOWAIT || !alive(loop) || loop->stopping) loop->now = clock_now(loop);
    int r = 0;
    while (alive(loop) && !loop->stopping) {
        r = iterate(loop, mode);
        if (r < 0 || mode != TL_RUN_DEFAULT) break;
    }
    loop->stopping = false;
    loop->running = false;
    if (r < 0) return r;
    return alive(loop) ? 1 : 0;
}

TL_API void tl_loop_stop(tl_loop *loop) {
    if (loop) loop->stopping = true;
}

TL_API uint64_t tl_now(const tl_loop *loop) {
    return loop ? loop->now : 0;
}

TL_API void tl_update_time(tl_loop *loop) {
    if (loop) loop->now = clock_now(loop);
}

TL_API const char *tl_loop_timers_name(const tl_loop *loop) {
    return loop ? loop->timer_backend->name : nullptr;
}

TL_API const char *tl_loop_io_name(const tl_loop *loop) {
    return loop ? loop->io->name() : nullptr;
}

TL_API void tl_loop_stats_get(const tl_loop *loop, tl_loop_stats *out) {
    if (!out) return;
    if (!loop) {
        std::memset(out, 0, sizeof *out);
        return;
    }
    *out = loop->stats;
    out->timers_active = timers_active(loop);
    out->unref_active = loop->unref_active;
}

TL_API int tl_loop_alive(const tl_loop *loop) {
    return loop && alive(loop) ? 1 : 0;
}

TL_API int tl_loop_fd(const tl_loop *loop) {
    if (!loop) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    return loop->io->poll_fd();
}

TL_API uint64_t tl_loop_timeout(const tl_loop *loop) {
    if (!loop) return 0;
    TL_CHECK_LOOP_THREAD(loop);
    if (loop->stopping || loop->idle_hooks || streams_pending(loop)) return 0;
    /* io_uring re-arms ride on the next wait; a host about to block on
       tl_loop_fd would never see their completions. Submit them now (one
       syscall) rather than make the host run an extra round. Completions
       already waiting (or a failed submit, which the next tl_loop_run
       reports) mean the host must not block. */
    if (loop->io->needs_enter() && (loop->io->flush() < 0 || loop->io->needs_enter())) return 0;
    /* A fresh read: the cached time may be a whole host iteration old, and
       a timeout from it would make the host wait that much too long. */
    uint64_t mono = timer_timeout(loop, clock_now(loop));
    if (!loop->clocks[TL_CLOCK_BOOTTIME].timers && !loop->clocks[TL_CLOCK_REALTIME].timers)
        return mono;
    uint64_t other = clocks_remaining(loop);
    return other < mono ? other : mono;
}

TL_API int tl_loop_fork(tl_loop *loop) {
    if (!loop) return -EINVAL;
    if (loop->running) return -EBUSY;
    IoBackend *fresh;
    int r = create_io(loop, loop->io_kind, &fresh);
    if (r < 0) return r;
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
        return r;
    }
    /* Closes the inherited epoll descriptor or unmaps the inherited ring in
       this process only; the parent's stays as it was. A kernel object the
       loop gains later needs a step of its own above, as the clocks'
       timerfds have. */
    delete loop->io;
    loop->io = fresh;
    return 0;
}

} // extern "C"

/* Each count is kept up by start/stop; the walk recomputes it from the
   structures themselves. Timers are counted by their backend plus the ready
   list (both walked by verify.cc), so their share is taken from that. Debug
   builds run it inside loop_verify too. */
extern "C" const char *tl_detail_loop_check(const tl_loop *loop) noexcept {
    uint64_t io = 0, io_unref = 0, streams = 0, listeners = 0;
    for (size_t fd = 0; fd < loop->io_slots_size; ++fd) {
        const tl_io *w = loop->io_slots[fd].watcher;
        if (!w) continue;
        if (w->fd != (int)fd) return "fd table: a watcher filed under another fd";
        if (!(w->flags & IO_ACTIVE)) return "fd table: an inactive watcher";
        if (w->flags & IO_INTERNAL) continue;
        /* Streams and listeners are counted by stream.cc (a closing stream
           may have left the table already). */
        streams += (w->flags & IO_STREAM) != 0;
        listeners += (w->flags & IO_LISTENER) != 0;
        if (w->flags & IO_HANDLE_KINDS) continue;
        ++io;
        io_unref += (w->flags & IO_UNREF) != 0;
    }
    if (io != loop->stats.io_active) return "io_active differs from the fd table";
    if (streams > loop->stats.streams_active) return "more streams in the fd table than active";
    if (listeners != loop->stats.listeners_active)
        return "listeners_active differs from the fd table";
    uint64_t asyncs = 0, unref = io_unref + loop->stream_unref;
    for (const tl_async *a = loop->asyncs.head; a; a = a->next) {
        if (!(a->magic & HANDLE_ACTIVE) || a->loop != loop) return "async list: not active here";
        if (a->next ? a->next->prev != a : loop->asyncs.tail != a) return "async list: links";
        ++asyncs;
        unref += (a->magic & HANDLE_UNREF) != 0;
    }
    if (asyncs != loop->stats.asyncs_active) return "asyncs_active differs from the list";
    uint64_t signals = 0;
    for (const tl_signal *s = loop->signals; s; s = s->next) {
        if (!(s->magic & HANDLE_ACTIVE) || s->loop != loop) return "signal list: not active here";
        ++signals;
        unref += (s->magic & HANDLE_UNREF) != 0;
    }
    if (signals != loop->stats.signals_active) return "signals_active differs from the list";
    uint64_t hooks = 0, idle = 0;
    for (int kind = 0; kind < kHookKinds; ++kind) {
        const OrderedList<tl_hook> &list = loop->hooks[kind];
        for (const tl_hook *h = list.head; h; h = h->next) {
            if (!(h->flags & HOOK_ACTIVE) || h->loop != loop || h->kind != (uint32_t)kind)
                return "hook list: not an active hook of this kind and loop";
            if (h->next ? h->next->prev != h : list.tail != h) return "hook list: links";
            if (h->next && h->next->seq <= h->seq) return "hook list: not in start order";
            ++hooks;
            idle += kind == TL_HOOK_IDLE;
            unref += (h->flags & HOOK_UNREF) != 0;
        }
    }
    if (hooks != loop->stats.hooks_active) return "hooks_active differs from the lists";
    if (idle != loop->idle_hooks) return "idle_hooks differs from the IDLE list";
    uint64_t timers = timers_active(loop);
    if (loop->active_handles != timers + io + asyncs + signals + hooks +
                                    loop->stats.streams_active + loop->stats.listeners_active)
        return "active_handles is not the sum of the kinds";
    /* Unreferenced timers cannot be enumerated: they make up the rest. */
    if (loop->unref_active < unref || loop->unref_active - unref > timers)
        return "unref_active does not match the handles' flags";
    return nullptr;
}

extern "C" {

/* The generic strerror text, except where the library gives the errno a
   narrower meaning and the generic one misleads ("No such file or
   directory" for an unknown timer backend). Each message still says which
   errno it stands for. */
TL_API const char *tl_strerror(int err) {
    switch (err) {
    case 0:
        return "success";
    case -ENOENT:
        return "no such timer backend (ENOENT; tl_timer_backend_names lists the registered ones)";
    case -EBUSY:
        return "busy (EBUSY): handle already active, loop still has active handles, or call "
               "made from inside the loop's own callbacks";
    case -ENOSPC:
        return "too many active timers (ENOSPC; tl_loop_options.max_timers)";
    case -EEXIST:
        return "already exists (EEXIST): fd watched by another watcher of this loop, signal "
               "watched by another loop, or timer backend name already registered";
    case -ENOSYS:
        return "not available (ENOSYS): I/O backend missing from this build or kernel";
    case -EPERM:
        return "operation not permitted (EPERM): fd cannot be polled (regular file, "
               "directory, /dev/null: what epoll refuses), or the kernel refused io_uring";
    default:
        break;
    }
    if (err > 0 || err < -4095) return "unknown error";
    const char *msg = strerrordesc_np(-err);
    return msg ? msg : "unknown error";
}

#define TL_STR2(x) #x
#define TL_STR(x) TL_STR2(x)
TL_API const char *tl_version(void) {
    return TL_STR(TL_VERSION_MAJOR) "." TL_STR(TL_VERSION_MINOR) "." TL_STR(TL_VERSION_PATCH);
}

} // extern "C"
