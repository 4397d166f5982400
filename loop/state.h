/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: struct tl_loop, the loop's private state, the live
 * loop of an id (loop_by_id), and the handle counting every activation and
 * deactivation goes through (handle_activated & co).
 */
#ifndef TICKLOOP_LOOP_STATE_H
#define TICKLOOP_LOOP_STATE_H

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <pthread.h>
#include <sys/uio.h>

#include "loop/handle_flags.h"
#include "loop/io_event.h"
#include "loop/lateness.h"
#include "loop/list.h"
#include "loop/timer_queue.h"
#include "tickloop/tickloop.h"

/* The test seam's clock reader (tl_detail_loop_set_clock, clock.h). */
typedef uint64_t (*tl_detail_clock_fn)(int clock, void *ctx);

namespace tl::detail {
/* I/O batching (io/batch.h, which decides it): tl_loop::batch. */
struct IoBatch {
    uint64_t bound_ns;        /* io_batch_ns; 0: no batching of either kind      */
    uint64_t last_io_ns;      /* loop time of the last wait that returned events */
    uint64_t period_start_ns; /* the measuring period (io/batch.cc): its start,  */
    uint64_t period_events;   /* the events of its waits after the first,        */
    uint64_t spell_gap_ns;    /* the mean gap that began the dense spell         */
    uint64_t hold_until_ns;   /* no dense spell before this loop time            */
    uint32_t period_waits;    /* the period's waits with events after the first  */
    bool period_open;         /* a period is being measured                      */
    bool adaptive;            /* io_batch_adaptive                               */
    bool dense;               /* adaptive: the next wait gathers                 */
    bool kernel;              /* the backend gathers itself (io_uring min wait)  */
};

struct IoSlot;     /* io/backend.h */
class IoBackend;   /* io/backend.h */
struct HandleIo;   /* io/io.h */
struct StreamPath; /* stream/core.h */
} // namespace tl::detail

struct tl_loop {
    /* Hot: read on every timer start and every iteration. */
    uint32_t id;             /* non-zero, unique per process: tags handles' owner */
    bool running;            /* inside tl_loop_run                                */
    bool stopping;           /* tl_loop_stop called                               */
    uint64_t active_handles; /* timers, user I/O, asyncs, signals, hooks */
    uint64_t unref_active;   /* of those, the unreferenced ones          */
    /* The timers: a domain per clock and the queue driving them
       (timer_queue.h). timers.domain[TL_CLOCK_MONOTONIC].now is tl_now. */
    tl::detail::TimerQueue timers;
    tl::detail::IoBackend *io;
    tl_io_kind io_kind;            /* EPOLL or URING: what tl_loop_fork re-creates */
    uint32_t fork_gen;             /* the process's fork count when its kernel objects were made */
    uint64_t timer_slack_ns;       /* 0: leave alone                           */
    tl::detail::IoBatch batch;     /* io_batch_ns, io_batch_adaptive (io/batch.h) */
    pthread_t run_thread;          /* valid while running: debug thread check  */
    tl_detail_clock_fn test_clock; /* the test seam: null reads the real clocks  */
    void *test_clock_ctx;
#ifndef NDEBUG
    uint64_t verify_ops; /* calls since the last full walk           */
#endif

    /* I/O: the fd registry (loop/io.cc), so a stale event never reaches a
       stopped watcher; both I/O backends work against it. */
    tl::detail::IoSlot *io_slots;
    size_t io_slots_size;
    size_t io_count; /* registrations (slots with a watcher)      */
    uint32_t io_gen; /* last generation given; never 0 in a tag   */

    /* Async: one eventfd for all tl_async of this loop. */
    int async_fd;
    tl_io async_watcher;
    tl::detail::OrderedList<tl_async> asyncs; /* in start order */

    /* Signals: one signalfd for every watched signal. */
    int signal_fd;
    tl_io signal_watcher;
    tl_signal *signals;
    tl_signal *signal_cursor;
    sigset_t signal_mask;            /* signals in the signalfd   */
    uint32_t signal_watchers[_NSIG]; /* watchers per signal       */

    /* timer_slack_ns applied to run_thread's slack by this loop (slack.cc). */
    bool slack_applied;
    pthread_t slack_thread;

    /* Hooks, one start-ordered list per tl_hook_kind. */
    tl::detail::OrderedList<tl_hook> hooks[tl::detail::kHookKinds];
    uint64_t hook_seq;   /* bumped per tl_hook_start               */
    uint64_t idle_hooks; /* active IDLE hooks: the wait must not block */

    /* Streams and listeners (loop/stream.cc). */
    tl_stream *stream_pending_head; /* streams with callbacks due: FIFO */
    tl_stream *stream_pending_tail;
    uint64_t stream_unref;  /* bound streams and started listeners that are unreferenced */
    void *read_buf;         /* the readiness path's one read buffer; null until used */
    struct iovec *iov_free; /* copies of 2-4 buffer write arrays: free blocks */
    void *iov_chunks;       /* the chunks those blocks come from (stream.cc) */
    uint32_t read_buffer_size, read_buffer_count;
    const tl::detail::StreamPath *stream_path; /* the path's table (stream/core.h) */
    const tl::detail::HandleIo *handle_io;     /* streams' and listeners' events (io/io.h) */
    uint32_t accepts_paused;                   /* listeners paused after an accept error          */
    int accepted_fd;                           /* the fd an accept callback is running for, or -1 */
    tl_timer accept_timer;                     /* resumes them (unreferenced, started on demand) */

    tl_loop_stats stats; /* counters; the *_active fields are kept live */
    tl::detail::ReadyEvent events[tl::detail::kMaxEvents];
    tl::detail::LatenessHistogram lateness; /* cold: 7.8 KB, last */
};

namespace tl::detail {

/* The live loop whose id is id, or null (lifecycle.cc keeps the list: loops
   register in tl_loop_new and leave in tl_loop_free). Any thread. */
tl_loop *loop_by_id(uint32_t id) noexcept;

/* True in a child after fork() until tl_loop_fork: the loop's epoll set or
   ring is still the parent's, which the child must not edit (lifecycle.cc). */
bool loop_inherited(const tl_loop *loop) noexcept;

/* Every activation and deactivation of a handle goes through these, so that
   tl_loop_alive (a referenced handle active) is one comparison.
   The unreferenced count is a branch, not an add of the bool: the two
   counters then stay two scalar increments (an add of both is vectorised
   into more instructions than that). */
inline void handle_activated(tl_loop *loop, bool unref) noexcept {
    ++loop->active_handles;
    if (unref) [[unlikely]]
        ++loop->unref_active;
}
inline void handle_deactivated(tl_loop *loop, bool unref) noexcept {
    --loop->active_handles;
    if (unref) [[unlikely]]
        --loop->unref_active;
}
/* An active handle's reference changed from `was_unref` to `unref`. */
inline void handle_ref_changed(tl_loop *loop, bool was_unref, bool unref) noexcept {
    if (was_unref != unref) loop->unref_active += unref ? 1 : (uint64_t)-1;
}

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_STATE_H */
