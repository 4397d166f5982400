/*
 * tickloop: a Linux event loop with pluggable timers, C API.
 *
 * The names and behaviour here are fixed by the project's contract
 * (CONTRACT.md): they may be extended, never renamed or changed.
 *
 * Conventions:
 * - Fallible functions return int: 0 (or a count) on success, a negative
 *   errno on failure. errno is not the channel. Nothing prints, aborts or
 *   exits on bad input.
 * - Time is uint64_t nanoseconds on CLOCK_MONOTONIC. Durations that would
 *   overflow saturate at UINT64_MAX, which means "never".
 * - Handles (tl_timer, tl_io, tl_async, tl_signal) are owned and allocated by
 *   the caller, usually embedded in its own objects. Starting, stopping and
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

/* The one place the version lives; meson.build reads it from here. */
#define TL_VERSION_MAJOR 0
#define TL_VERSION_MINOR 1
#define TL_VERSION_PATCH 0

#ifndef TL_API
#define TL_API __attribute__((visibility("default")))
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
    uint64_t tick_ns;     /* wheel granularity; 0: default (1 ms)                   */
    uint32_t wheel_slots; /* single-level wheel size (power of two); 0: default     */
    /* Extensions (after the contract's fields):                                  */
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
    /* more fields may follow; always start from tl_loop_options_init()           */
} tl_loop_options;

/* Fills *opts with the defaults (all zero / NULL). Any thread. */
TL_API void tl_loop_options_init(tl_loop_options *opts);

/* Creates a loop. opts may be NULL (defaults). On success stores the loop in
 * *out and returns 0. Errors: -EINVAL (out NULL, bad io kind, wheel_slots not a
 * power of two, timer_slack_ns above 1 s), -ENOENT (unknown timer backend name), -ENOSYS (io kind
 * not available in this build), -ENOMEM, or the kernel's errno from creating the poller (-EMFILE,
 * ...). Any thread; the loop is then used from one thread. */
TL_API int tl_loop_new(tl_loop **out, const tl_loop_options *opts);

/* Frees a loop with no active handles. Returns 0, -EINVAL (NULL), or -EBUSY
 * while timers, I/O watchers, asyncs or signal watchers are active (the loop is
 * left untouched and usable). Loop thread. */
TL_API int tl_loop_free(tl_loop *loop);

/* Runs the loop.
 *   TL_RUN_DEFAULT: until tl_loop_stop() or no active handle remains;
 *   TL_RUN_ONCE:    one iteration, blocking until something happens;
 *   TL_RUN_NOWAIT:  one iteration, never blocking.
 * Returns 1 if active handles remain, 0 if none, -EINVAL (NULL loop or bad
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
    uint64_t deadline; /* absolute ns; valid while active                    */
    uint64_t repeat;   /* ns; 0 = one-shot                                   */
    tl_timer_cb cb;    /* set by tl_timer_init                               */
    void *data;        /* the caller's                                       */
    uintptr_t link[3]; /* owned by the timer backend while active            */
    uint32_t flags;    /* owned by the loop                                  */
    uint32_t reserved;
};

/* Prepares a timer (inactive). Must be called once before any other use; t
 * must not be active. NULL t is ignored. Any thread (t not shared). */
TL_API void tl_timer_init(tl_timer *t, tl_timer_cb cb, void *data);

/* Starts t: deadline = tl_now(loop) + timeout_ns (saturating at UINT64_MAX,
 * "never"), then every repeat_ns if non-zero. Starting an active timer
 * reschedules it (the heartbeat pattern). Returns 0, -EINVAL (NULL loop or t,
 * t has no callback, t active on another loop), or -ENOMEM (a heap backend
 * could not grow; t is then inactive). Loop thread, callbacks included. */
TL_API int tl_timer_start(tl_loop *loop, tl_timer *t, uint64_t timeout_ns, uint64_t repeat_ns);

/* Stops t. Returns 0 (also when t is not active) or -EINVAL (NULL arguments,
 * t active on another loop). Loop thread, callbacks included; after it returns
 * the caller may free t. */
TL_API int tl_timer_stop(tl_loop *loop, tl_timer *t);

/* Restarts t with timeout and repeat both equal to t->repeat, whether or not
 * it is active. Returns 0, -EINVAL (NULL arguments, or t->repeat == 0: t is
 * left as it was), or -ENOMEM as tl_timer_start. Loop thread. */
TL_API int tl_timer_again(tl_loop *loop, tl_timer *t);

/* 1 if t is active (scheduled), 0 if not or if t is NULL. */
TL_API int tl_timer_active(const tl_timer *t);

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
 * regular files, directories, /dev/null and /dev/zero are refused, procfs and
 * sysfs files accepted), -ENOMEM. Never -EBUSY. A peer's half-close
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
    uint32_t magic;
};

/* Starts a (which need not be initialised; it must not be active). The loop
 * calls cb once per iteration after one or more tl_async_send(). An active
 * async keeps the loop running. Returns 0, -EINVAL (NULL arguments), -EBUSY (a
 * already active), or the kernel's errno creating the eventfd. Loop thread. */
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
    uint32_t magic;
    uint32_t reserved;
};

/* Delivers signo to cb through a signalfd. While a watcher for signo exists
 * the signal is blocked in the thread that started it (block it in every
 * thread of a multi-threaded program, or another thread may receive it).
 * Several watchers of one signal all run. s need not be initialised and must
 * not be active. Returns 0, -EINVAL (NULL arguments, signo out of range,
 * SIGKILL or SIGSTOP), -EBUSY (s already active), or the kernel's errno.
 * Loop thread. */
TL_API int tl_signal_start(tl_loop *loop, tl_signal *s, int signo, tl_signal_cb cb, void *data);

/* Stops s; the last watcher of a signal restores its blocked state. Returns 0
 * (also when not active) or -EINVAL. Loop thread. */
TL_API int tl_signal_stop(tl_loop *loop, tl_signal *s);

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
    /* Extensions (after the contract's fields):                                */
    uint64_t io_internal_errors;  /* requests the loop made of the kernel on its
                                     own (io_uring poll update/removal) that
                                     failed; always 0 unless tickloop has a bug
                                     (debug builds abort instead)                */
    uint64_t timers_rearm_failed; /* repeating timers whose re-arm failed (the
                                     backend's insert returned an error): they
                                     ran once more and are now inactive          */
} tl_loop_stats;

/* Copies the loop's counters into *out (zeroes it for a NULL loop). */
TL_API void tl_loop_stats_get(const tl_loop *loop, tl_loop_stats *out);

/* A static message for a value returned by this API (negative errno or 0). */
TL_API const char *tl_strerror(int err);

/* "MAJOR.MINOR.PATCH" of the library actually linked. */
TL_API const char *tl_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TICKLOOP_TICKLOOP_H */
