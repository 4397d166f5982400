/* SPDX-License-Identifier: MIT */
/*
 * tickloop: a Linux event loop with pluggable timers, C API.
 *
 * The names and behaviour documented here are stable: within a soname they
 * are extended, never renamed or changed (docs/abi.md). Each function also
 * has a man page (man/, installed with the library: `man tl_loop_new`).
 *
 * Conventions:
 * - Fallible functions return int: 0 (or a count) on success, a negative
 *   errno on failure. errno is not the channel. Nothing prints, aborts or
 *   exits on bad input.
 * - Time is uint64_t nanoseconds on CLOCK_MONOTONIC. Durations that would
 *   overflow saturate at UINT64_MAX, which means "never".
 * - Handles (tl_timer, tl_io, tl_async, tl_signal, tl_hook) are owned and
 *   allocated by the caller, usually embedded in its own objects. Starting, stopping and
 *   restarting them allocates nothing per call, except that a heap timer
 *   backend's array grows geometrically (start then returns -ENOMEM and the
 *   timer stays inactive if that growth fails).
 * - A loop is used from one thread. Only tl_async_send() may be called from
 *   any thread.
 *
 * Pure C11; compiles as C and as C++ on its own.
 */
#ifndef TICKLOOP_TICKLOOP_H
#define TICKLOOP_TICKLOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h> /* struct sockaddr, socklen_t (tl_stream_connect) */
#include <sys/uio.h>    /* struct iovec (tl_stream_write) */

/* The one place the version lives; meson.build reads it from here. */
#define TL_VERSION_MAJOR 0
#define TL_VERSION_MINOR 4
#define TL_VERSION_PATCH 0

#ifndef TL_API
#define TL_API __attribute__((visibility("default")))
#endif

/* Compile-time checks of the ABI promises below, in C11 and in C++. */
#ifdef __cplusplus
#define TL_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define TL_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Loop                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct tl_loop tl_loop;

typedef enum { TL_IO_AUTO = 0, TL_IO_EPOLL, TL_IO_URING } tl_io_kind;
typedef enum { TL_RUN_DEFAULT = 0, TL_RUN_ONCE, TL_RUN_NOWAIT } tl_run_mode;

typedef struct tl_loop_options {
    tl_io_kind io;        /* AUTO: io_uring when usable, else epoll. NULL options or AUTO
                             also consult the TICKLOOP_IO environment variable
                             ("epoll", "io_uring", "auto").                          */
    const char *timers;   /* "heap2", "heap4", "wheel", "hwheel", or the name of a
                             registered backend; NULL: the TICKLOOP_TIMERS
                             environment variable, else the library default       */
    uint64_t tick_ns;     /* wheel granularity; 0: default (1 ms). At most 1 s (1e9),
                             else tl_loop_new returns -EINVAL (a wheel fires per
                             tick: a longer one would hold every timer that long) */
    uint32_t wheel_slots; /* single-level wheel size (power of two); 0: default     */
    /* Limits, added after the first fields (the order is part of the ABI):       */
    uint32_t max_timers;               /* active timers allowed; tl_timer_start of one more returns
                                          -ENOSPC (Netty's maxPendingTimeouts); 0: unlimited   */
    uint32_t max_timers_per_iteration; /* timer callbacks per iteration before I/O
                             is served again (the rest run next iteration, in
                             order); 0: default 8192                             */
    uint64_t timer_slack_ns;           /* prctl(PR_SET_TIMERSLACK) applied to the thread that
                                       runs the loop; 0: leave the thread's slack alone
                                       (Linux's default is 50 us). At most 1 s (1e9), else
                                       tl_loop_new returns -EINVAL. Set by the first
                                       tl_loop_run on a thread, and again only when another
                                       loop changed it since (no syscall per run); when the
                                       last such loop of the thread is freed there, the
                                       thread gets back the slack it had before. Do not
                                       change the slack yourself meanwhile.               */
    uint64_t collect_interval_ns;      /* the leeway of every timer that has none of its own
                                          (tl_timer_set_leeway), libev's timeout collect
                                          interval: such a timer may fire up to this much
                                          after its deadline, so the loop wakes once for all
                                          the timers due within one interval instead of once
                                          per deadline. 0 (the default on every backend):
                                          none. The heaps then fire each timer at its
                                          deadline, exactly; the wheels already batch per
                                          tick (tick_ns), and an interval of a tick or less
                                          changes nothing there; a longer one coalesces
                                          ticks. Set it when wake-ups, not lateness, are
                                          the cost (~40 us of CPU each on a small VM):
                                          1 ms took a million delayed tasks on heap4 from
                                          ~30,000 wake-ups to ~2,000. At most 1 s (1e9),
                                          else tl_loop_new returns -EINVAL.                  */
    /* Streams (extensions): the loop's read buffers, shared by all its
       streams ("Streams and listeners" below).                                     */
    uint32_t read_buffer_size;  /* bytes per buffer, a power of two from 256 to
                                   16 MiB, else -EINVAL; 0: default 16384. The
                                   most one read callback is given.          */
    uint32_t read_buffer_count; /* buffers in the io_uring buffer ring, a power
                                   of two from 1 to 32768, else -EINVAL; 0:
                                   default 256 (4 MiB with the default size,
                                   allocated when the first stream reads). The
                                   readiness path (epoll) uses one buffer.   */
    /* I/O batching (extension), what collect_interval_ns is for timers: once
       a wait has I/O to report, it may go on gathering more for up to
       io_batch_ns from its start before the loop runs the callbacks, so a
       loop fed one event at a time wakes once per batch instead of once per
       event (~40 us of CPU each on a small VM), at the cost of up to that
       much added lateness per event. A timer's deadline still ends the wait
       on time. 0 (the default): every wait returns with its first event.
       In effect on io_uring where the kernel has a minimum wait (Linux 6.12,
       IORING_FEAT_MIN_TIMEOUT); epoll has no such wait and ignores it
       (io_batch_adaptive, below, gathers on both).
       tl_loop_stats.io_batch_ns says which. At most 1 s (1e9), else
       tl_loop_new returns -EINVAL.                                          */
    uint64_t io_batch_ns;
    /* I/O batching that follows the load (extension): 1 makes the loop
       gather only while events arrive densely, within the same bound
       io_batch_ns (which must then be non-zero, else -EINVAL); 0 (the
       default): io_batch_ns alone, as above. Other values: -EINVAL.
       The rule. The loop measures the mean time between events over a
       period of at least 8 waits with events and 4 times io_batch_ns,
       from the times it reads once per iteration anyway (never a clock
       read per event): the period's length divided by the events its
       waits returned. A sparse loop becomes dense when that lets at least
       2 events arrive within io_batch_ns; a dense one becomes sparse
       again when fewer than 1.5 would, or when the mean has grown to
       over twice the one that made it dense: gathering then slows the
       load itself (clients that wait for each answer, as HTTP keep-alive
       does), and the loop stays sparse for 256 times io_batch_ns before
       it tries again. A blocking wait that returns no event when the last
       one is older than io_batch_ns (a timer's wake-up, an idle spell)
       makes the loop sparse at once, so the first event after a quiet
       spell is never held. While sparse, every wait returns with its
       first event; while dense, a wait gathers as io_batch_ns
       says: on io_uring with the kernel's minimum wait where it has one
       (Linux 6.12), elsewhere (epoll, older kernels) by sleeping until
       io_batch_ns after the wait began before it polls, as libev's
       io_collect_interval does. Either way an event waits at most
       io_batch_ns more than it would have, and a timer's deadline ends the
       gathering on time. tl_loop_stats.io_batched_waits counts the waits
       that gathered, and tl_loop_stats.io_batch_ns reads io_batch_ns on
       both backends.
       TICKLOOP_IO_BATCH sets io_batch_ns and io_batch_adaptive when both
       are 0 (or opts is NULL), as TICKLOOP_IO does for io: "off",
       "fixed:T" or "adaptive:T", T a number with a unit ns, us, ms or s
       (e.g. adaptive:200us, fixed:1ms), at most 1 s and, for adaptive,
       more than 0. Anything else: tl_loop_new fails with -EINVAL, named by
       tl_loop_new_error().                                                 */
    uint32_t io_batch_adaptive;
    uint32_t reserved32; /* zero (-EINVAL otherwise): a later field's place */
    /* ABI: the struct has a fixed size, TL_LOOP_OPTIONS_SIZE bytes, for the
       life of the soname (docs/abi.md). A field added later takes the place
       of reserved words at the end: add it just above `reserved`, shrink
       `reserved` by as many uint64_t, and give it a zero value that means
       "the default", so a program built before it existed, whose reserved
       words are zero, keeps today's behaviour. Always start from
       tl_loop_options_init() (or zero the struct); tl_loop_new() returns
       -EINVAL if a reserved word is not zero.                                */
    uint64_t reserved[22];
} tl_loop_options;

#define TL_LOOP_OPTIONS_SIZE 256
TL_STATIC_ASSERT(sizeof(tl_loop_options) == TL_LOOP_OPTIONS_SIZE,
                 "tl_loop_options keeps its size: a new field replaces reserved words");

/* Fills *opts with the defaults (all zero / NULL). Any thread. */
TL_API void tl_loop_options_init(tl_loop_options *opts);

/* Creates a loop. opts may be NULL (defaults). On success stores the loop in
 * *out and returns 0. Errors: -EINVAL (out NULL, bad io kind, a TICKLOOP_IO
 * value other than "epoll", "io_uring" or "auto" when io is TL_IO_AUTO,
 * wheel_slots not a power of two or larger than the wheel backend takes, a
 * reserved word not zero, tick_ns, timer_slack_ns, collect_interval_ns
 * or io_batch_ns above 1 s, io_batch_adaptive not 0 or 1 or set with
 * io_batch_ns 0, a TICKLOOP_IO_BATCH value it cannot parse,
 * read_buffer_size or read_buffer_count out of range), -ENOENT
 * (unknown timer backend name, from opts->timers or TICKLOOP_TIMERS),
 * -ENOSYS (io kind not available in this build or kernel), -EPERM (io_uring
 * asked for and refused by the kernel), -ENOMEM, or the kernel's errno from
 * creating the poller (-EMFILE, ...). tl_loop_new_error() then says which
 * option or environment variable was refused and why. Any thread; the loop
 * is then used from one thread. */
TL_API int tl_loop_new(tl_loop **out, const tl_loop_options *opts);

/* Why the last tl_loop_new() call of the calling thread failed, in words
 * that name the option or environment variable and its value, e.g.
 * `environment variable TICKLOOP_IO='EPOLL': not 'epoll', 'io_uring' or
 * 'auto' (the values are lower-case)` or `tl_loop_options.wheel_slots is
 * 1000: not a power of two`; NULL if that call succeeded or none was made.
 * Per thread, like dlerror(3): the string stays valid and unchanged until
 * the thread's next tl_loop_new(). Any thread. */
TL_API const char *tl_loop_new_error(void);

/* Frees a loop with no active handles. Returns 0, -EINVAL (NULL), or -EBUSY
 * while timers, I/O watchers, asyncs, signal watchers or hooks are active,
 * unreferenced ones included (the loop is left untouched and usable;
 * tl_loop_stats_get counts the active handles per kind), or while it runs.
 * Loop thread. */
TL_API int tl_loop_free(tl_loop *loop);

/* Runs the loop (one iteration is drawn in "Loop hooks" below).
 *   TL_RUN_DEFAULT: until tl_loop_stop() or no active referenced handle
 *                   remains (tl_loop_alive; see "References");
 *   TL_RUN_ONCE:    one iteration, blocking until something happens;
 *   TL_RUN_NOWAIT:  one iteration, never blocking.
 * Returns 1 if active referenced handles remain, 0 if none, -EINVAL (NULL loop or bad
 * mode), -EBUSY (called from inside one of this loop's callbacks), or a
 * negative errno from the kernel's wait. Loop thread. */
TL_API int tl_loop_run(tl_loop *loop, tl_run_mode mode);

/* Makes the running tl_loop_run() return after the current iteration; if the
 * loop is not running, the next tl_loop_run() returns at once, running no
 * iteration (libuv's uv_stop). Either way the request is then consumed.
 * NULL is ignored. Loop thread (from another thread use a tl_async). */
TL_API void tl_loop_stop(tl_loop *loop);

/* The loop's time: CLOCK_MONOTONIC ns cached at the start of the iteration.
 * Returns 0 for NULL. Loop thread. */
TL_API uint64_t tl_now(const tl_loop *loop);

/* Re-reads the clock into the cached time (for long callbacks). Loop thread. */
TL_API void tl_update_time(tl_loop *loop);

/* Name of the loop's timer backend, e.g. "hwheel"; NULL for a NULL loop. */
TL_API const char *tl_loop_timers_name(const tl_loop *loop);

/* "epoll" or "io_uring"; NULL for a NULL loop. */
TL_API const char *tl_loop_io_name(const tl_loop *loop);

/* ------------------------------------------------------------------------ */
/* Timers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct tl_timer tl_timer;
typedef void (*tl_timer_cb)(tl_loop *loop, tl_timer *timer);

struct tl_timer {      /* fields the caller may read; at most 64 bytes       */
    uint64_t deadline; /* absolute ns on the timer's clock; valid while active */
    uint64_t repeat;   /* ns; 0 = one-shot (the period of a periodic timer)  */
    tl_timer_cb cb;    /* set by tl_timer_init                               */
    void *data;        /* the caller's                                       */
    uintptr_t link[3]; /* owned by the timer backend while active            */
    uint32_t flags;    /* owned by the loop                                  */
    uint32_t reserved;
};

/* Prepares a timer (inactive). Must be called once before any other use.
 * Called on a timer that is still active (a bug: stop it first), it stops it
 * on its loop first, as tl_timer_stop would, so the loop stays consistent; it
 * must then be called from that loop's thread, and a debug build of the
 * library says so on stderr. A copy of an active timer, or fresh memory that
 * merely looks like one, is just initialised. NULL t is ignored. Any thread
 * (t not shared). */
TL_API void tl_timer_init(tl_timer *t, tl_timer_cb cb, void *data);

/* Starts t: deadline = tl_now(loop) + timeout_ns (saturating at UINT64_MAX,
 * "never"), then every repeat_ns if non-zero. Starting an active timer
 * reschedules it (the heartbeat pattern). Returns 0, -EINVAL (NULL loop or t,
 * t has no callback, t active on another loop), -ENOMEM (a heap backend
 * could not grow, or a custom backend's insert failed; t is then inactive),
 * or -ENOSPC (t is not active and the loop already has
 * tl_loop_options.max_timers active timers; t stays inactive). Loop thread,
 * callbacks included. */
TL_API int tl_timer_start(tl_loop *loop, tl_timer *t, uint64_t timeout_ns, uint64_t repeat_ns);

/* Stops t. Returns 0 (also when t is not active) or -EINVAL (NULL arguments,
 * t active on another loop). Loop thread, callbacks included; after it returns
 * the caller may free t. */
TL_API int tl_timer_stop(tl_loop *loop, tl_timer *t);

/* Restarts t with timeout and repeat both equal to t->repeat, whether or not
 * it is active. Returns 0, -EINVAL (NULL arguments, or t->repeat == 0: t is
 * left as it was), or -ENOMEM and -ENOSPC as tl_timer_start. Loop thread. */
TL_API int tl_timer_again(tl_loop *loop, tl_timer *t);

/* 1 if t is active (scheduled), 0 if not or if t is NULL. */
TL_API int tl_timer_active(const tl_timer *t);

/* ------------------------------------------------------------------------ */
/* Clocks, leeway, absolute and periodic timers                             */
/* ------------------------------------------------------------------------ */

/* The clocks a timer can run on (each in its own instance of the loop's timer
 * backend; timers on different clocks are not ordered against each other):
 * - TL_CLOCK_MONOTONIC: CLOCK_MONOTONIC, the clock of tl_now() and of every
 *   relative timer. Stops while the system is suspended.
 * - TL_CLOCK_BOOTTIME: CLOCK_BOOTTIME, which also counts suspended time: a
 *   "30 minutes from now" that must hold across a laptop's sleep.
 * - TL_CLOCK_REALTIME: the wall clock. A timer on it fires when the wall
 *   clock reaches its deadline, also when the clock is set or stepped: the
 *   kernel tells the loop of a jump (a timerfd with TFD_TIMER_CANCEL_ON_SET),
 *   the loop never polls for one. For "at 03:00 every day". */
typedef enum { TL_CLOCK_MONOTONIC = 0, TL_CLOCK_BOOTTIME, TL_CLOCK_REALTIME } tl_clock;

/* A fresh read of clock, in ns (not the loop's cached time); 0 for an
 * unknown clock. Any thread. */
TL_API uint64_t tl_clock_now(tl_clock clock);

/* The largest leeway stored; a larger one is stored as this (about 39 h). */
#define TL_TIMER_LEEWAY_MAX ((uint64_t)65535 << 31)

/* How late t may fire, from its next start on (tl_timer_start,
 * tl_timer_start_at, tl_timer_again and each re-arm of a repeating timer):
 * it fires at a time in [deadline, deadline + leeway]. 0, the default after
 * tl_timer_init: as soon as possible. The loop uses the windows of all its
 * timers to wake as few times as it can: it sleeps until the earliest
 * deadline + leeway and then runs every timer whose deadline has passed.
 * Resolution: stored with 16 significant bits, rounded *down*: below 65,536
 * ns exactly, above that to a multiple of 2^(bits - 16) (under 1/32768 of the
 * value), at most TL_TIMER_LEEWAY_MAX. Kept across stop and start; only
 * tl_timer_init clears it. 0 leaves t to the loop's collect_interval_ns,
 * lent each time t starts while inactive (a restart of an active t keeps
 * what it has).
 * On a wheel the tick is the finest window: a timer fires once its tick
 * (tick_ns) has passed, which honours any leeway of a tick or more, and a
 * smaller one whenever the deadline lies within the leeway of its tick's
 * end. Returns 0 or -EINVAL (NULL t). Any thread while t
 * is inactive, the loop thread while it is active. */
TL_API int tl_timer_set_leeway(tl_timer *t, uint64_t leeway_ns);

/* The stored leeway: t's own, or while t is active on a loop with a
 * collect_interval_ns and has none of its own, that interval (what a timer
 * backend reads). 0 for NULL t. */
TL_API uint64_t tl_timer_leeway(const tl_timer *t);

/* Starts t to fire when `clock` reaches the absolute time deadline_ns. With
 * period_ns > 0 it is periodic without drift: each next deadline is
 * deadline_ns + k * period_ns, the first one later than the time the callback
 * ran (the loop's time on that clock), so missed periods are skipped, never
 * run in a burst; the re-arm happens before the callback, as for tl_timer_start.
 * A deadline already past fires in the next iteration. t->deadline then holds
 * the deadline on that clock and t->repeat the period. Starting an active t
 * moves it (to another clock too); starting it again with tl_timer_start
 * makes it a relative TL_CLOCK_MONOTONIC timer. Returns 0, -EINVAL (NULL
 * loop or t, unknown clock, no callback, t active on another loop), -ENOMEM,
 * -ENOSPC (max_timers), or the kernel's errno from creating the clock's
 * timerfd, which the loop's first TL_CLOCK_BOOTTIME or TL_CLOCK_REALTIME
 * timer opens (-EMFILE, ...). Loop thread, callbacks included. */
TL_API int tl_timer_start_at(tl_loop *loop, tl_timer *t, tl_clock clock, uint64_t deadline_ns,
                             uint64_t period_ns);

/* The clock t was last started on (TL_CLOCK_MONOTONIC after tl_timer_init
 * and after tl_timer_start); TL_CLOCK_MONOTONIC for NULL t. */
TL_API tl_clock tl_timer_clock(const tl_timer *t);

/* The loop's time on clock as of its last clock read (tl_now() for
 * TL_CLOCK_MONOTONIC): the `now` its timers on that clock were compared with
 * in the last iteration that had any, or a fresh read if none has. 0 for a
 * NULL loop or an unknown clock. Loop thread. */
TL_API uint64_t tl_loop_now(const tl_loop *loop, tl_clock clock);

/* ------------------------------------------------------------------------ */
/* I/O watchers                                                             */
/* ------------------------------------------------------------------------ */

enum { TL_READ = 1, TL_WRITE = 2, TL_ERROR = 4, TL_HUP = 8 };

typedef struct tl_io tl_io;
typedef void (*tl_io_cb)(tl_loop *loop, tl_io *w, unsigned revents);

struct tl_io {
    /* public, read-only */
    int fd;          /* the watched descriptor, set by tl_io_init            */
    unsigned events; /* TL_READ|TL_WRITE requested by the last tl_io_start   */
    tl_io_cb cb;
    void *data; /* the caller's */
    /* private */
    uint32_t flags;
    uint32_t gen; /* registration generation, tags kernel completions   */
    uintptr_t priv[2];
};

/* Prepares a watcher for fd (inactive). NULL w is ignored. */
TL_API void tl_io_init(tl_io *w, int fd, tl_io_cb cb, void *data);

/* Watches w->fd for events (TL_READ and/or TL_WRITE; TL_ERROR and TL_HUP are
 * always reported). On an active watcher, changes its events. The watcher is
 * level-triggered: the callback runs every iteration while the fd is ready.
 * One active watcher per fd per loop. Returns 0, -EINVAL (NULL, no callback,
 * events empty or unknown bits, active on another loop), -EBADF (fd < 0 or not
 * open), -EEXIST (another watcher of this loop watches fd), -EPERM (fd cannot
 * be polled: the rule is the kernel's, what epoll accepts, on every backend;
 * regular files, directories, /dev/null and /dev/zero are refused; of procfs,
 * the system-wide files are accepted (/proc/meminfo, /proc/mounts,
 * /proc/sys/..., /proc/pressure/..., /proc/net/...) and of the per-process
 * ones under /proc/<pid>/ only mounts, mountinfo and net/..., the others
 * (stat, status, cmdline, maps, io, fdinfo/...) are refused; sysfs attribute
 * files are accepted), -ENOMEM. Never -EBUSY. A peer's half-close
 * (shutdown(SHUT_WR)) is TL_READ (read() returns 0), not TL_HUP; TL_HUP means
 * both directions are closed. Loop thread. */
TL_API int tl_io_start(tl_loop *loop, tl_io *w, unsigned events);

/* Stops watching. Returns 0 (also when not active) or -EINVAL (NULL, active on
 * another loop). A stopped watcher's callback is not called again, even for an
 * event already collected in the current iteration. Loop thread. */
TL_API int tl_io_stop(tl_loop *loop, tl_io *w);

/* ------------------------------------------------------------------------ */
/* Async wakeups                                                            */
/* ------------------------------------------------------------------------ */

typedef struct tl_async tl_async;
typedef void (*tl_async_cb)(tl_loop *loop, tl_async *a);

struct tl_async {
    tl_async_cb cb;
    void *data; /* the caller's */
    /* private */
    tl_loop *loop;
    tl_async *next, *prev;
    uint32_t pending; /* accessed atomically */
    uint32_t magic;   /* marker and state (active, initialised, unreferenced) */
};

/* Prepares a (inactive, referenced). Recommended before the first
 * tl_async_start: a start of an initialised async that is already active is
 * then refused with -EBUSY in O(1), and no field of a is read before it was
 * written. Must not be called on an active async (it would forget that it is
 * active). NULL is ignored. Any thread (a not shared yet). */
TL_API void tl_async_init(tl_async *a);

/* Starts a (initialised with tl_async_init, or not: an uninitialised async
 * keeps working, at the price of a walk over the loop's asyncs to tell an
 * active handle from stale memory). The loop calls cb once per iteration
 * after one or more tl_async_send(). When several asyncs have sends pending,
 * their callbacks run in the order the asyncs were started (a restart counts
 * as a new start). An active async keeps the loop running unless unreferenced
 * (tl_async_set_ref). Returns 0, -EINVAL (NULL arguments), -EBUSY (a already
 * active, on this loop or another), or the kernel's errno creating the
 * eventfd (-EMFILE, ...). Loop thread. */
TL_API int tl_async_start(tl_loop *loop, tl_async *a, tl_async_cb cb, void *data);

/* Wakes a's loop and makes it call a's callback; sends coalesce until the
 * callback runs. Returns 0 or -EINVAL (NULL, a not active). Any thread, and
 * async-signal-safe; a must stay active until the call returns. */
TL_API int tl_async_send(tl_async *a);

/* Stops a. Returns 0 (also when not active) or -EINVAL. Loop thread. */
TL_API int tl_async_stop(tl_loop *loop, tl_async *a);

/* ------------------------------------------------------------------------ */
/* Signals                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct tl_signal tl_signal;
typedef void (*tl_signal_cb)(tl_loop *loop, tl_signal *s, int signo);

struct tl_signal {
    int signo;
    tl_signal_cb cb;
    void *data; /* the caller's */
    /* private */
    tl_loop *loop;
    tl_signal *next, *prev;
    uint32_t magic; /* marker and state (active, initialised, unreferenced) */
    uint32_t reserved;
};

/* Prepares s (inactive, referenced), as tl_async_init does for asyncs: a
 * double start of an initialised watcher is an O(1) -EBUSY. Must not be
 * called on an active watcher. NULL is ignored. Any thread. */
TL_API void tl_signal_init(tl_signal *s);

/* Delivers signo to cb through a signalfd. While a watcher for signo exists
 * the signal is blocked in the thread that started it (block it in every
 * thread of a multi-threaded program, or another thread may receive it).
 * Several watchers of one signal in one loop all run. A signal is watched by
 * one loop at a time in the process: while a loop has a watcher of signo, a
 * start on another loop is refused with -EEXIST (two loops would compete for
 * each instance). In a child after fork(), loops inherited from the parent
 * hold no signal unless the child calls tl_loop_fork on them, so a new loop
 * of the child may watch any signal (a pre-fork server's workers watch
 * SIGTERM on loops of their own). s need not be initialised (tl_signal_init
 * is recommended)
 * and must not be active. Returns 0, -EINVAL (NULL arguments, signo out of
 * range, SIGKILL or SIGSTOP), -EBUSY (s already active), -EEXIST (another
 * loop watches signo), -ENOMEM (no memory to register the loop's signalfd
 * or its fork handler; nothing changed), or the kernel's errno. Loop
 * thread. */
TL_API int tl_signal_start(tl_loop *loop, tl_signal *s, int signo, tl_signal_cb cb, void *data);

/* Stops s; the last watcher of a signal restores its blocked state. Returns 0
 * (also when not active) or -EINVAL. Loop thread. */
TL_API int tl_signal_stop(tl_loop *loop, tl_signal *s);

/* ------------------------------------------------------------------------ */
/* Loop hooks                                                               */
/* ------------------------------------------------------------------------ */

/* One iteration of tl_loop_run, with the points where hooks run:
 *
 *   IDLE hooks -> PREPARE hooks -> wait for I/O (at most until the next
 *   timer; not at all while an IDLE hook is active) -> read the clock ->
 *   due timers -> I/O callbacks, asyncs, signals -> CHECK hooks
 *
 * PREPARE runs just before the loop may block (flush a batch of writes,
 * compute something the wait depends on); CHECK just after the iteration's
 * callbacks (deferred work that follows I/O); IDLE once per iteration while
 * active, and an active IDLE hook makes the wait a non-blocking poll, so the
 * loop spins through iterations for as long as it stays active (background
 * work in small slices: stop the hook when the work is done). libuv's
 * uv_prepare/uv_check/uv_idle, libev's ev_prepare/ev_check/ev_idle.
 *
 * Hooks of one kind run in the order they were started (a restart counts as
 * a new start). A hook callback may start, stop or free any hook, itself
 * included; a hook stopped before its turn does not run, and a hook started
 * from a hook callback of its own kind runs from the next iteration on. */

typedef struct tl_hook tl_hook;
typedef void (*tl_hook_cb)(tl_loop *loop, tl_hook *h);
typedef enum { TL_HOOK_PREPARE = 0, TL_HOOK_CHECK, TL_HOOK_IDLE } tl_hook_kind;

struct tl_hook { /* 56 bytes                                               */
    tl_hook_cb cb;
    void *data; /* the caller's                                           */
    /* private */
    tl_loop *loop;
    tl_hook *next, *prev;
    uint64_t seq; /* the loop's start sequence: orders a kind's dispatch    */
    uint32_t kind;
    uint32_t flags;
};
TL_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(tl_hook) == 56,
                 "tl_hook keeps its size (a handle embedded in the caller's objects)");

/* Prepares h (inactive, referenced) to run cb at the point `kind` names.
 * Must not be called on an active hook. NULL h is ignored; an unknown kind or
 * a NULL cb makes tl_hook_start refuse h. Any thread (h not shared yet). */
TL_API void tl_hook_init(tl_hook *h, tl_hook_kind kind, tl_hook_cb cb, void *data);

/* Starts h: its callback then runs once per iteration at its point. An
 * active hook keeps the loop running unless unreferenced (tl_hook_set_ref).
 * Returns 0, -EINVAL (NULL arguments, h not initialised with a known kind and
 * a callback), or -EBUSY (h already active, on this loop or another).
 * Allocates nothing. Loop thread, callbacks included. */
TL_API int tl_hook_start(tl_loop *loop, tl_hook *h);

/* Stops h. Returns 0 (also when h is not active) or -EINVAL (NULL arguments,
 * h active on another loop). After it returns the caller may free h, also
 * from inside h's own callback. Loop thread, callbacks included. */
TL_API int tl_hook_stop(tl_loop *loop, tl_hook *h);

/* 1 if h is active, 0 if not or if h is NULL. */
TL_API int tl_hook_active(const tl_hook *h);

/* ------------------------------------------------------------------------ */
/* References                                                               */
/* ------------------------------------------------------------------------ */

/* tl_loop_run(TL_RUN_DEFAULT) runs while a *referenced* handle is active.
 * Every handle starts referenced; tl_*_set_ref(loop, h, 0) makes h, whether
 * active or not, stop keeping the loop running (libuv's uv_unref): a stats
 * timer, a SIGTERM watcher or a listening socket that should not by itself
 * hold the program. ref = 1 references it again. The setting is part of the
 * handle: it is kept across stop and start, and reset only by the handle's
 * init function. An unreferenced handle still runs its callbacks whenever the
 * loop runs, and still makes tl_loop_free return -EBUSY while active.
 *
 * Each returns 0, or -EINVAL (NULL arguments, or the handle active on another
 * loop). ref is read as a boolean. Loop thread, callbacks included. For an
 * async or a signal watcher that was never initialised nor started, call
 * tl_async_init / tl_signal_init first (set_ref keeps the state it finds). */
TL_API int tl_timer_set_ref(tl_loop *loop, tl_timer *t, int ref);
TL_API int tl_io_set_ref(tl_loop *loop, tl_io *w, int ref);
TL_API int tl_async_set_ref(tl_loop *loop, tl_async *a, int ref);
TL_API int tl_signal_set_ref(tl_loop *loop, tl_signal *s, int ref);
TL_API int tl_hook_set_ref(tl_loop *loop, tl_hook *h, int ref);

/* 1 if a referenced handle is active (tl_loop_run(TL_RUN_DEFAULT) would
 * iterate), else 0; 0 for NULL (libuv's uv_loop_alive). Loop thread. */
TL_API int tl_loop_alive(const tl_loop *loop);

/* ------------------------------------------------------------------------ */
/* Embedding in another event loop                                          */
/* ------------------------------------------------------------------------ */

/* To run tickloop inside another loop (GLib, Qt, a plain poll()), the host
 * watches one descriptor and one timeout (libuv's uv_backend_fd and
 * uv_backend_timeout):
 *
 *   for (;;) {
 *       uint64_t ns = tl_loop_timeout(loop);           // UINT64_MAX: none
 *       poll tl_loop_fd(loop) for POLLIN, at most ns (rounded *up* to the
 *           host's resolution, or a timer is reached early and the next
 *           round waits again);
 *       tl_loop_run(loop, TL_RUN_NOWAIT);              // never blocks
 *   }
 *
 * Calling tl_loop_run(TL_RUN_NOWAIT) when nothing is ready is harmless (an
 * empty iteration), so the host may call it more often than needed. */

/* A descriptor that is readable while the loop has I/O to process (an fd
 * ready, an async sent, a signal pending). On the epoll backend it is the
 * epoll descriptor; on io_uring it is an eventfd registered with the ring
 * (io_uring_register_eventfd), created by the first call, that the kernel
 * signals for every completion (the ring's own descriptor is not a reliable
 * readiness source with deferred task work); the loop drains it in each
 * iteration. The loop owns the descriptor: do not read, close or change its
 * flags. It stays the same for the loop's life, except that tl_loop_fork
 * replaces it in the child (ask again after a fork). Returns the descriptor,
 * -EINVAL (NULL), or the kernel's errno creating or registering the eventfd
 * (-EMFILE, ...). Loop thread. */
TL_API int tl_loop_fd(const tl_loop *loop);

/* How long, in ns from now (a fresh clock read), the host may wait on
 * tl_loop_fd() before calling tl_loop_run(loop, TL_RUN_NOWAIT): 0 when the
 * loop has work now (a due timer, an active IDLE hook, a stop requested), the
 * time to the next timer's deadline, or UINT64_MAX when only I/O can wake the
 * loop (no timer). Also 0 for a NULL loop, and never 0 otherwise: a timer
 * started at a deadline already past and then restarted into the future, or
 * stopped, leaves no zero behind on any backend. Call it just before the host
 * blocks: on io_uring it first hands the kernel the requests the last
 * iteration queued (poll re-arms, which otherwise ride on the next wait),
 * so that their completions reach tl_loop_fd(); if that submission fails it
 * returns 0 and the next tl_loop_run reports the error. Loop thread. */
TL_API uint64_t tl_loop_timeout(const tl_loop *loop);

/* ------------------------------------------------------------------------ */
/* Fork                                                                     */
/* ------------------------------------------------------------------------ */

/* Call in the child after fork() to go on using the loop it inherited (a
 * pre-fork server: create the loop and its listening watchers, fork workers,
 * each worker runs the loop). The child shares the parent's epoll set or
 * ring, eventfd and signalfd until then, and a shared kernel object would
 * mix up the two processes' events. tl_loop_fork creates new ones (epoll set
 * or io_uring ring of the same kind, the async eventfd, the signalfd, the
 * embedding descriptor on its next tl_loop_fd call) and registers every active
 * I/O watcher again; active timers, asyncs (a send pending at the fork still
 * runs in the child), signal watchers and hooks keep working. Handles stay
 * where they are; nothing is run.
 *
 * Call it before any other use of the loop in the child, from the thread that
 * forked (the child's only thread), never from inside a callback. Signals
 * stay blocked as the forking thread had them. A child that will not use the
 * inherited loop may instead stop its handles and free it without this call:
 * tl_io_stop on it leaves the parent's epoll set or ring alone. In the parent nothing changes
 * and nothing needs calling (libev's ev_loop_fork, libuv's uv_loop_fork).
 *
 * Signals: an inherited loop holds none of its signals in the child until
 * this call takes them again (tl_signal_start); a loop the child created
 * meanwhile may have taken one, and the call then fails with -EEXIST and
 * changes nothing: stop the watchers of that signal on one of the two loops
 * (on the inherited loop, tl_signal_stop leaves the parent's signalfd
 * alone) and call it again.
 *
 * Returns 0, -EINVAL (NULL), -EBUSY (called while the loop runs), -EEXIST
 * (a signal the loop watches is watched by another loop of the child), or
 * the kernel's errno from creating a new object or registering a watcher
 * again (-EMFILE, -ENOMEM, ...). After a failure the loop must not be run:
 * call tl_loop_fork again (each attempt starts over with fresh objects), or
 * stop its handles and free it. A watcher whose fd the program closed
 * without stopping it is skipped (-EBADF is not an error), as epoll had
 * dropped it. */
TL_API int tl_loop_fork(tl_loop *loop);

/* ------------------------------------------------------------------------ */
/* Streams and listeners                                                    */
/* ------------------------------------------------------------------------ */

/* A stream is a connected, non-blocking stream socket (TCP, UNIX) whose
 * receives and sends the loop performs; a listener is a listening socket
 * whose accepts the loop performs. Two paths, same callbacks, same order,
 * same results:
 * - readiness (epoll, and io_uring without buffer rings): the loop waits for
 *   readiness, then recv()s into ONE loop-owned buffer and send()s
 *   (MSG_NOSIGNAL) directly;
 * - completion (io_uring with buffer rings and multishot receive, Linux
 *   6.0): one multishot receive per reading stream into a loop-owned ring
 *   of provided buffers (tl_loop_options.read_buffer_size/_count), sends and
 *   a multishot accept as submissions, all handed to the kernel with the
 *   iteration's one io_uring_enter. When the ring runs dry, a stream's
 *   receive ends (-ENOBUFS inside the loop, counted in
 *   tl_loop_stats.buffer_ring_exhausted) and is re-armed once buffers come
 *   back; no byte is lost or reordered.
 * tl_loop_stream_path() says which path a loop uses. The environment variable
 * TICKLOOP_URING_STREAMS=readiness forces the readiness path on io_uring
 * (read when the loop is created).
 *
 * A stream either wraps a connected socket (accepted, or connected by the
 * caller) or connects one itself (tl_stream_connect), and may half-close
 * (tl_stream_shutdown) while it goes on reading.
 *
 * Handles. tl_stream (128 bytes), tl_write_req (64 bytes) and tl_listener
 * (64 bytes) are the caller's, usually embedded in its own objects; only the
 * fields marked public may be read. An idle stream (not reading, nothing
 * queued) holds no buffer. Nothing is allocated per read, write, accept,
 * connect or shutdown.
 * A stream is bound to a loop by its first tl_stream_read_start,
 * tl_stream_write or tl_stream_close, and from then until its close
 * callback has run it is an active handle of that loop: it keeps
 * tl_loop_run(TL_RUN_DEFAULT) running unless unreferenced
 * (tl_stream_set_ref), makes tl_loop_free return -EBUSY, and survives
 * tl_loop_fork. Once closed (tl_stream_close) it keeps the loop alive until
 * its close callback has run, referenced or not, as libuv's closing handles
 * do: tl_loop_run in any mode runs the iteration that completes it. A
 * started listener is active until tl_listener_stop. One fd
 * carries at most one stream, listener or tl_io watcher per loop: a second
 * stream or listener on it gets -EBUSY (tl_io_start on it keeps returning
 * -EEXIST).
 *
 * Errors. Every function returns 0 or a negative errno, never crashes on
 * the misuse it lists: -EINVAL for NULL arguments, a stream that did not go
 * through tl_stream_init, or a handle bound to another loop; -EPIPE for a
 * stream that is closing or closed (tl_stream_close called). All of them are
 * called on the loop's thread (callbacks included). */

typedef struct tl_stream tl_stream;
typedef struct tl_write_req tl_write_req;
typedef struct tl_listener tl_listener;

/* n > 0: n bytes at buf, valid until the callback returns (the buffer then
 * goes back to the loop); n == 0: the peer closed its side (EOF, also a
 * shutdown(SHUT_WR)); n < 0: -errno (-ECONNRESET, ...). After n <= 0 reading
 * has stopped (writes may go on after EOF: a half-close). */
typedef void (*tl_read_cb)(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n);
/* 0: every byte was handed to the kernel; -errno otherwise (-EPIPE when the
 * peer is gone: SIGPIPE is never raised, -ECONNRESET, ...); -ECANCELED when
 * the stream was closed first. req may be freed or reused inside. */
typedef void (*tl_write_cb)(tl_loop *loop, tl_write_req *req, int status);
/* The stream's fd is closed; s may be freed inside. */
typedef void (*tl_close_cb)(tl_loop *loop, tl_stream *s);
/* fd >= 0: a new connected socket, non-blocking and close-on-exec, owned by
 * the callback from now on; fd < 0: -errno (-EMFILE, -ENFILE, -ENOBUFS,
 * -ENOMEM): the loop pauses accepting (no busy loop) and goes on when a
 * stream of the loop closes or after 50 ms, whichever comes first. */
typedef void (*tl_accept_cb)(tl_loop *loop, tl_listener *l, int fd);

struct tl_stream {
    /* public, read-only except data */
    int fd;         /* the socket, set by tl_stream_init          */
    uint32_t flags; /* private: state                             */
    void *data;     /* the caller's                               */
    /* private */
    tl_io io; /* the registration in the loop's fd table */
    tl_read_cb read_cb;
    tl_close_cb close_cb;
    tl_write_req *wq_head;   /* queued writes: completed ones first, */
    tl_write_req *wq_send;   /* then the first not completely sent,   */
    tl_write_req *wq_tail;   /* up to the last queued                 */
    uint64_t wq_bytes;       /* bytes queued, not yet sent            */
    tl_stream *pending_next; /* the loop's list of streams with callbacks due */
    int32_t error;           /* a send failure every later write gets */
    uint32_t parked;         /* io_uring: received buffers held while stopped */
};
TL_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(tl_stream) == 128,
                 "tl_stream keeps its size (a handle embedded in the caller's objects)");

struct tl_write_req {
    /* public */
    tl_stream *stream; /* the stream it was queued on (set by tl_stream_write) */
    void *data;        /* the caller's                                        */
    /* private */
    tl_write_cb cb;
    tl_write_req *next;
    union {
        struct iovec one; /* a write of one buffer: its copy, advanced as sent */
        struct {
            const struct iovec *iov; /* 2-4 buffers: the loop's copy; more: the caller's */
            size_t offset;           /* bytes of iov[index] already sent */
        } many;
    } bufs;
    int iovcnt;
    int index; /* first buffer not fully sent */
    int status;
    uint32_t flags;
};
TL_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(tl_write_req) == 64,
                 "tl_write_req keeps its size (a handle embedded in the caller's objects)");
TL_STATIC_ASSERT(offsetof(tl_write_req, stream) == 0 &&
                     offsetof(tl_write_req, data) == sizeof(void *),
                 "tl_write_req's public fields keep their offsets");

struct tl_listener {
    /* public, read-only except data */
    int fd;         /* the listening socket, set by tl_listener_start */
    uint32_t flags; /* private: state                                 */
    void *data;     /* the caller's                                   */
    /* private */
    tl_io io; /* the registration in the loop's fd table */
};
TL_STATIC_ASSERT(sizeof(void *) != 8 || sizeof(tl_listener) == 64,
                 "tl_listener keeps its size (a handle embedded in the caller's objects)");

/* Prepares s for fd, a stream socket the stream owns from now on
 * (tl_stream_close closes it): a connected one, or a fresh unconnected one
 * for tl_stream_connect. The loop makes it non-blocking when it binds it.
 * Must precede every other use, and must not be called on a stream that
 * is bound and not closed. NULL s is ignored. Any thread (s not shared). */
TL_API void tl_stream_init(tl_stream *s, int fd, void *data);

/* Starts reading: cb runs for every chunk received, at EOF and on an error
 * (after which reading has stopped). On an active reader it changes the
 * callback. Returns 0, -EINVAL (NULL loop, s or cb; s not initialised; s bound
 * to another loop), -EPIPE (s closing), -EBADF (fd < 0 or not open), -ENOTSOCK (fd is not
 * a socket), -EBUSY (another stream, listener or I/O watcher holds fd in this
 * loop), -ENOMEM (the loop's read buffers could not be
 * allocated), or the kernel's errno. Loop thread. */
TL_API int tl_stream_read_start(tl_loop *loop, tl_stream *s, tl_read_cb cb);

/* Stops reading; no read callback runs after it returns. Data the kernel had
 * already received for s stays queued for the next tl_stream_read_start (on
 * the completion path, what a receive completed before the stop took effect
 * is held, in order, in the loop's buffers until then: the one case in which
 * a stream that does not read holds buffers).
 * Returns 0 (also when not reading), -EINVAL (NULL, not initialised, bound
 * to another loop) or -EPIPE (closing). Loop thread. */
TL_API int tl_stream_read_stop(tl_loop *loop, tl_stream *s);

/* Queues the iovcnt buffers at iov (0 to IOV_MAX, 1024, of them; 0 queues
 * nothing but still completes in order) for sending after every write queued
 * before it. The array iov is copied before this call returns when it holds
 * 1 to 4 buffers (as uv_write copies its uv_buf_t array), so a
 * stack-allocated `struct iovec v[1..4]` is safe on every path; a longer
 * array must stay valid and unchanged until cb runs (debug builds abort,
 * naming the call, when they find it changed as its send is prepared). req
 * and the buffers themselves stay the caller's until cb runs; req must not be
 * queued already. The buffers go to the kernel as one vectored send
 * (sendmsg), never one send per buffer. Writes complete in the order queued,
 * always from the loop (never inside this call); a short send is continued
 * by the loop. Never raises SIGPIPE: a closed peer is -EPIPE in cb, and once
 * a send fails every write queued on s later completes with that error.
 * Nothing is allocated per write: the copies of 2-4 buffer arrays live in
 * storage the loop reuses, which grows only when more such writes are queued
 * at once than ever before. Returns 0, -ENOMEM (that storage could not
 * grow), -EINVAL
 * (NULL loop, s, req or cb; iov NULL with iovcnt > 0; iovcnt out of range or
 * lengths adding up beyond SSIZE_MAX; s not initialised or bound to another
 * loop), -EPIPE (s closing, or shut down by tl_stream_shutdown), -EBUSY
 * (req is the first, the sending or the last request queued on s: queuing
 * a request again before its callback is refused when it is one of those,
 * undefined otherwise; or, as tl_stream_read_start, fd held by another
 * handle), -EBADF, -ENOTSOCK as tl_stream_read_start. Loop thread. */
TL_API int tl_stream_write(tl_loop *loop, tl_stream *s, tl_write_req *req, const struct iovec *iov,
                           int iovcnt, tl_write_cb cb);

/* Bytes queued on s and not yet handed to the kernel; 0 for NULL. Loop
 * thread. */
TL_API size_t tl_stream_write_queue_size(const tl_stream *s);

/* Closes s: stops reading, completes the queued writes with -ECANCELED (in
 * order; a write the kernel is already sending on io_uring completes with
 * its own result), closes fd, then calls cb (may be NULL), from the loop,
 * never inside this call. s may be freed inside cb, not before. Works on an
 * initialised stream never bound (it binds it to loop for the callback).
 * Returns 0, -EINVAL (NULL loop or s, not initialised, bound to another
 * loop) or -EPIPE (already closing). Loop thread. */
TL_API int tl_stream_close(tl_loop *loop, tl_stream *s, tl_close_cb cb);

/* 0: connected; -errno otherwise (-ECONNREFUSED, -ETIMEDOUT, -ENETUNREACH,
 * ...); -ECANCELED when the stream was closed first. */
typedef void (*tl_connect_cb)(tl_loop *loop, tl_stream *s, int status);

/* Connects s (initialised on an unconnected socket) to addr: on the io_uring
 * completion path as one submission (IORING_OP_CONNECT), on readiness as a
 * non-blocking connect completed by writability. cb runs exactly once, from
 * a later loop iteration, never from inside the call. Binds s to loop; while
 * connecting s is an active handle (tl_stream_set_ref applies), and
 * tl_stream_close cancels the connect: cb gets the cancellation before the
 * close callback runs. addr need not outlive the call. Nothing is
 * allocated per connect. Returns 0, or at
 * once: -EINVAL (NULL loop, s, addr or cb; addrlen shorter than addr's family
 * needs; s not initialised or bound to another loop; s already reading,
 * writing, connecting or connected), -EPIPE (s closing or closed), -EBUSY
 * (the fd carries another handle of this loop), -EBADF, -ENOTSOCK (as
 * tl_stream_read_start), -EAFNOSUPPORT (addr's family is not the socket's),
 * or another immediate error of connect(2) that concerns the call, not the
 * peer (-EADDRNOTAVAIL, ...). What concerns the peer (refused, no such
 * UNIX path, unreachable) goes to cb, on every path alike.
 * tl_stream_read_start and tl_stream_write may be called before cb runs:
 * reading starts and writes go out, in order, once connected. If the
 * connect fails, cb gets the error first, then the queued writes complete
 * with that same error and an active reader gets it as n < 0. Loop
 * thread. */
TL_API int tl_stream_connect(tl_loop *loop, tl_stream *s, const struct sockaddr *addr,
                             socklen_t addrlen, tl_connect_cb cb);

/* 0: shut down; -errno: the error of a queued write or of shutdown(2);
 * -ECANCELED when the stream was closed first. */
typedef void (*tl_shutdown_cb)(tl_loop *loop, tl_stream *s, int status);

/* Half-close: once every write queued before it has been handed to the
 * kernel, shutdown(fd, SHUT_WR) on every path (io_uring would run an
 * IORING_OP_SHUTDOWN on a worker thread); then cb with
 * the status tl_shutdown_cb describes (a close cancels it: cb runs before
 * the close callback). cb runs from the loop, never inside this call, after
 * the callbacks of the writes queued before it. Reading goes on; the peer
 * reads EOF. tl_stream_write after it returns -EPIPE (no callback), as on a
 * closing stream. May be called while s is still connecting: the shutdown follows
 * the connect and the writes queued meanwhile. While it is due s is an
 * active handle. Nothing is allocated per shutdown. Returns 0, or -EINVAL
 * (NULL loop, s or cb; s not initialised; bound to another loop), -EPIPE
 * (closing, closed, or already shut down), -ENOTCONN (neither connected nor
 * connecting: a socket given to tl_stream_init counts as connected when the
 * kernel says it has a peer), -EBUSY (as tl_stream_read_start). Loop
 * thread. */
TL_API int tl_stream_shutdown(tl_loop *loop, tl_stream *s, tl_shutdown_cb cb);

/* Starts accepting connections on fd, a listening socket that stays the
 * caller's (tl_listener_stop does not close it). cb gets each new socket, or
 * a negative errno (see tl_accept_cb). l needs no init. Returns 0, -EINVAL
 * (NULL loop, l or cb), -EBUSY (l already started, or fd held by another
 * handle of this loop), -EBADF (fd < 0 or not open), -EPERM (fd cannot be
 * polled), or the kernel's errno. Loop thread. */
TL_API int tl_listener_start(tl_loop *loop, tl_listener *l, int fd, tl_accept_cb cb, void *data);

/* Stops accepting; no callback after it returns (a connection the kernel
 * accepted for l meanwhile is closed by the loop). l may then be freed. The
 * loop lets go of the listening socket before this returns, on every
 * backend: once the caller has closed fd, its port can be bound again and a
 * connect to it is refused, without another iteration. Returns 0 (also when not started) or -EINVAL
 * (NULL, started on another loop). Loop thread. */
TL_API int tl_listener_stop(tl_loop *loop, tl_listener *l);

/* As tl_io_set_ref (see "References"): ref 0 makes s or l, bound or not, not
 * keep tl_loop_run(TL_RUN_DEFAULT) running (a closing stream keeps it until
 * its close callback, whatever its reference). Returns 0 or -EINVAL (NULL
 * arguments, s not initialised, bound to another loop). Loop thread. */
TL_API int tl_stream_set_ref(tl_loop *loop, tl_stream *s, int ref);
TL_API int tl_listener_set_ref(tl_loop *loop, tl_listener *l, int ref);

/* The path the loop's streams and listeners take: "completion" (io_uring:
 * multishot receive into the buffer ring, sends and accepts as
 * submissions) or "readiness" (epoll; io_uring on a kernel without buffer
 * rings or multishot receive, probed when the loop is created, or with
 * TICKLOOP_URING_STREAMS=readiness). NULL for a NULL loop. Any thread. */
TL_API const char *tl_loop_stream_path(const tl_loop *loop);

/* ------------------------------------------------------------------------ */
/* Introspection                                                            */
/* ------------------------------------------------------------------------ */

typedef struct tl_loop_stats {
    uint64_t iterations;    /* loop iterations run                               */
    uint64_t empty_wakeups; /* iterations that woke from a wait and found nothing
                               to do (no callback ran)                           */
    uint64_t timers_fired;  /* timer callbacks run                               */
    uint64_t timers_active; /* timers inside the backend now                     */
    uint64_t io_events;     /* I/O callbacks run                                 */
    /* Active handles per kind, beside timers_active, so that a -EBUSY from
       tl_loop_free can be explained:                                        */
    uint64_t io_active;      /* user I/O watchers (the loop's own are not counted) */
    uint64_t asyncs_active;  /* started asyncs                                 */
    uint64_t signals_active; /* signal watchers                                */
    uint64_t hooks_active;   /* PREPARE, CHECK and IDLE hooks                  */
    uint64_t unref_active;   /* active handles of any kind that are unreferenced
                                (tl_*_set_ref 0): they do not keep the loop
                                running, but still make tl_loop_free -EBUSY    */
    /* Wake-up causes (extensions):                                               */
    uint64_t timer_wakeups;         /* iterations that ran at least one due timer  */
    uint64_t max_timers_per_wakeup; /* most timer callbacks one iteration ran      */
    /* Failures the loop absorbed (extensions):                                 */
    uint64_t io_internal_errors;  /* requests the loop made of the kernel on its
                                     own (io_uring poll update/removal) that
                                     failed; always 0 unless tickloop has a bug
                                     (debug builds abort instead)                */
    uint64_t timers_rearm_failed; /* repeating timers whose re-arm failed (the
                                     backend's insert returned an error): they
                                     ran once more and are now inactive          */
    /* Clocks (extensions):                                                     */
    uint64_t clock_changes; /* wall-clock sets or steps the kernel reported while
                               REALTIME timers were active                     */
    /* Streams and listeners (extensions):                                      */
    uint64_t streams_active;        /* streams bound to the loop, not yet closed    */
    uint64_t listeners_active;      /* started listeners                            */
    uint64_t stream_reads;          /* read callbacks with data (n > 0)             */
    uint64_t stream_writes;         /* tl_stream_write requests completed (any status) */
    uint64_t buffer_ring_exhausted; /* io_uring: receives that found the buffer
                                       ring empty (-ENOBUFS) and were re-armed
                                       once buffers came back; 0 on readiness */
    uint64_t accepts;               /* sockets handed to accept callbacks           */
    uint64_t io_batch_ns;           /* the I/O batching bound in effect: the
                                       loop's tl_loop_options.io_batch_ns on a
                                       backend that has it or with
                                       io_batch_adaptive, else 0              */
    /* ABI: the struct has a fixed size, TL_LOOP_STATS_SIZE bytes, for the life
       of the soname (docs/abi.md), so a newer library never writes past an
       older program's struct. A counter added later takes the place of a
       reserved word: add it just above `reserved` and shrink `reserved` by
       one. The library zeroes the reserved words.                             */
    uint64_t connects;         /* connect callbacks run (any status)              */
    uint64_t io_batched_waits; /* waits that gathered I/O (io_batch_ns): entered
                                  with io_uring's minimum wait, or preceded by
                                  the sleep that stands in for it             */
    uint64_t reserved[40];
} tl_loop_stats;

#define TL_LOOP_STATS_SIZE 512
TL_STATIC_ASSERT(sizeof(tl_loop_stats) == TL_LOOP_STATS_SIZE,
                 "tl_loop_stats keeps its size: a new counter replaces a reserved word");

/* Copies the loop's counters into *out (zeroes it for a NULL loop). */
TL_API void tl_loop_stats_get(const tl_loop *loop, tl_loop_stats *out);

/* How late the loop ran its timers, as it saw it. */
typedef struct tl_lateness {
    uint64_t count; /* timer callbacks measured */
    uint64_t p50_ns, p90_ns, p99_ns, p999_ns, max_ns;
    /* ABI: fixed at TL_LATENESS_SIZE bytes (one cache line) for the life of
       the soname (docs/abi.md); a figure added later takes a reserved word
       (add it just above `reserved`, shrink `reserved`). The library zeroes
       the reserved words. */
    uint64_t reserved[2];
} tl_lateness;

#define TL_LATENESS_SIZE 64
TL_STATIC_ASSERT(sizeof(tl_lateness) == TL_LATENESS_SIZE,
                 "tl_lateness keeps its size: a new figure replaces a reserved word");

/* Lateness of every timer fired since the loop was created or since the last
 * reset: the iteration's wake-up time (tl_now() in the callback) minus the
 * timer's deadline, in ns. A timer never fires early, so every value is >= 0.
 * The percentiles are nearest-rank (p50: the smallest value that at least half
 * of the values do not exceed), read from a log-linear histogram with 16
 * buckets per power of two: each reported percentile is never below the exact
 * one and at most 1/16 above it (exact below 32 ns). max_ns is exact. All are 0
 * while count is 0. reset != 0 clears the histogram after copying it.
 * Returns 0, or -EINVAL (loop or out NULL; nothing is cleared). Loop thread. */
TL_API int tl_loop_lateness(tl_loop *loop, tl_lateness *out, int reset);

/* A static message for a value returned by this API (negative errno or 0).
 * Where the library gives an errno a narrower meaning than the C library's
 * text, the message says it in the library's terms and names the errno:
 * -ENOENT from tl_loop_new is an unknown timer backend (not a missing file),
 * -ENOSPC is max_timers, -EBUSY an active handle or a busy loop, -EEXIST an
 * fd already watched, a signal watched by another loop or a backend name
 * taken, -ENOSYS an I/O backend this build or kernel lacks, -EPERM an fd that
 * cannot be polled or io_uring
 * refused. Other values get the C library's text; positive values and values
 * below -4095 get "unknown error". Any thread. */
TL_API const char *tl_strerror(int err);

/* "MAJOR.MINOR.PATCH" of the library actually linked. */
TL_API const char *tl_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TICKLOOP_TICKLOOP_H */
