/* SPDX-License-Identifier: MIT */
/*
 * tl_loop_options: their defaults, their checks, the environment variables
 * that stand in for unset ones (TICKLOOP_IO, TICKLOOP_TIMERS,
 * TICKLOOP_IO_BATCH), and the message
 * tl_loop_new_error gives when a creation fails.
 */
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "loop/handle_flags.h"
#include "loop/lifecycle.h"
#include "timers/timers.h"

using namespace tl::detail;

namespace {

/* Why the last tl_loop_new on this thread failed (tl_loop_new_error), as
   dlerror keeps its message: per thread, so that concurrent creations do not
   see each other's. Empty: the last call succeeded, or none was made. */
thread_local char new_error[256];

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

/* The largest tick_ns accepted. A wheel hands out every timer of a tick
 * once the tick has passed, so a tick of 2^40 ns (18 minutes) held a 2 ms
 * timer that long; a second is already far coarser than any wheel needs. */
constexpr uint64_t kMaxTickNs = 1000000000;

/* The largest collect_interval_ns accepted: a loop-wide second of lateness
 * is a unit mistake more often than a wish; a timer that may wait longer
 * says so with its own leeway. */
constexpr uint64_t kMaxCollectIntervalNs = 1000000000;

/* The largest io_batch_ns accepted, for the same reason. */
constexpr uint64_t kMaxIoBatchNs = 1000000000;

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

/* "T" of TICKLOOP_IO_BATCH: digits and a unit (ns, us, ms, s) into *ns;
   false if it is not that or exceeds a second. */
bool parse_duration(const char *s, uint64_t *ns) noexcept {
    if (*s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno) return false;
    uint64_t unit;
    if (std::strcmp(end, "ns") == 0)
        unit = 1;
    else if (std::strcmp(end, "us") == 0)
        unit = 1000;
    else if (std::strcmp(end, "ms") == 0)
        unit = 1000000;
    else if (std::strcmp(end, "s") == 0)
        unit = 1000000000;
    else
        return false;
    if (v > kMaxIoBatchNs / unit) return false;
    *ns = v * unit;
    return true;
}

/* The I/O batching: the options' fields, checked, or where both are 0
   TICKLOOP_IO_BATCH's "off", "fixed:T" or "adaptive:T". */
int resolve_io_batch(const tl_loop_options *opts, LoopSettings *out) noexcept {
    if (opts->io_batch_ns > kMaxIoBatchNs)
        return fail_new(-EINVAL, "tl_loop_options.io_batch_ns is %llu: above 1 s (1000000000)",
                        (unsigned long long)opts->io_batch_ns);
    if (opts->io_batch_adaptive > 1)
        return fail_new(-EINVAL, "tl_loop_options.io_batch_adaptive is %u: not 0 or 1",
                        opts->io_batch_adaptive);
    if (opts->io_batch_adaptive && !opts->io_batch_ns)
        return fail_new(-EINVAL, "tl_loop_options.io_batch_adaptive is 1 with io_batch_ns 0: "
                                 "adaptive batching needs a bound");
    out->io_batch_ns = opts->io_batch_ns;
    out->io_batch_adaptive = opts->io_batch_adaptive != 0;
    if (opts->io_batch_ns || opts->io_batch_adaptive) return 0;
    const char *env = std::getenv("TICKLOOP_IO_BATCH");
    if (!env || !*env || std::strcmp(env, "off") == 0) return 0;
    bool ok = false;
    if (std::strncmp(env, "fixed:", 6) == 0)
        ok = parse_duration(env + 6, &out->io_batch_ns);
    else if (std::strncmp(env, "adaptive:", 9) == 0)
        ok = parse_duration(env + 9, &out->io_batch_ns) && out->io_batch_ns != 0;
    if (!ok)
        return fail_new(-EINVAL,
                        "environment variable TICKLOOP_IO_BATCH='%.64s': not 'off', 'fixed:T' or "
                        "'adaptive:T' with T a duration such as 200us or 1ms (ns, us, ms, s; at "
                        "most 1 s; above 0 for adaptive)",
                        env);
    out->io_batch_adaptive = env[0] == 'a';
    return 0;
}

bool is_power_of_two(uint32_t v) noexcept {
    return v && !(v & (v - 1));
}

} // namespace

namespace tl::detail {

int fail_new(int err, const char *fmt, ...) noexcept {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(new_error, sizeof new_error, fmt, ap);
    va_end(ap);
    return err;
}

void clear_new_error() noexcept {
    new_error[0] = 0;
}

int resolve_options(const tl_loop_options *opts, LoopSettings *out) noexcept {
    /* Reserved words are where later fields go (docs/abi.md): refusing
       non-zero ones now keeps a program that skips tl_loop_options_init()
       from handing garbage to a field a later version adds. */
    for (size_t i = 0; i < sizeof opts->reserved / sizeof opts->reserved[0]; ++i)
        if (opts->reserved[i] != 0)
            return fail_new(-EINVAL,
                            "tl_loop_options.reserved[%zu] is not zero (start from "
                            "tl_loop_options_init)",
                            i);
    if (opts->reserved32 != 0)
        return fail_new(-EINVAL, "tl_loop_options.reserved32 is not zero (start from "
                                 "tl_loop_options_init)");

    int r = resolve_io_kind(opts, &out->io);
    if (r < 0) return r;
    if (opts->wheel_slots && !is_power_of_two(opts->wheel_slots))
        return fail_new(-EINVAL, "tl_loop_options.wheel_slots is %u: not a power of two",
                        opts->wheel_slots);
    if (opts->tick_ns > kMaxTickNs)
        return fail_new(-EINVAL, "tl_loop_options.tick_ns is %llu: above 1 s (1000000000)",
                        (unsigned long long)opts->tick_ns);
    if (opts->timer_slack_ns > kMaxTimerSlackNs)
        return fail_new(-EINVAL, "tl_loop_options.timer_slack_ns is %llu: above 1 s (1000000000)",
                        (unsigned long long)opts->timer_slack_ns);
    if (opts->collect_interval_ns > kMaxCollectIntervalNs)
        return fail_new(-EINVAL,
                        "tl_loop_options.collect_interval_ns is %llu: above 1 s (1000000000)",
                        (unsigned long long)opts->collect_interval_ns);
    r = resolve_io_batch(opts, out);
    if (r < 0) return r;

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
    out->timers = backend;
    out->timers_name = name;
    out->max_timers_per_iteration = opts->max_timers_per_iteration ? opts->max_timers_per_iteration
                                                                   : kDefaultMaxTimersPerIteration;
    out->collect_flags =
        opts->collect_interval_ns ? leeway_bits(opts->collect_interval_ns) | kLentLeeway : 0;
    return 0;
}

} // namespace tl::detail

extern "C" {

TL_API void tl_loop_options_init(tl_loop_options *opts) {
    if (opts) std::memset(opts, 0, sizeof *opts);
}

TL_API const char *tl_loop_new_error(void) {
    return new_error[0] ? new_error : nullptr;
}

} // extern "C"
