/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the loop's private state and the small interface every
 * I/O backend (epoll.cc, uring.cc) implements.
 */
#ifndef TICKLOOP_LOOP_LOOP_INTERNAL_H
#define TICKLOOP_LOOP_LOOP_INTERNAL_H

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <pthread.h>

#include "lateness.h"
#include "tickloop/timer_backend.h"
#include "timer_queue.h"
#include "timers/node.h"
#include "timers/timers.h"

/* The test seam's clock reader (tl_detail_loop_set_clock, below). */
typedef uint64_t (*tl_detail_clock_fn)(int clock, void *ctx);

namespace tl::detail {

/* One readiness report from an I/O backend: the tag given at registration
 * (fd in the low half, registration generation in the high half) and
 * TL_READ|TL_WRITE|TL_ERROR|TL_HUP. */
struct ReadyEvent {
    uint64_t tag;
    unsigned revents;
    /* A completion of a stream or listener request (io_uring's completion
       path; revents is then kCompletion): the CQE's res and flags. */
    int32_t res = 0;
    uint32_t cflags = 0;
};

/* ReadyEvent::revents of a completion: no readiness bit, never masked away. */
inline constexpr unsigned kCompletion = 1u << 31;
inline constexpr unsigned kCompletionKindMask = 3u; /* REQ_RECV, REQ_SEND, REQ_ACCEPT */

inline constexpr uint64_t io_tag(int fd, uint32_t gen) noexcept {
    return (uint64_t)gen << 32 | (uint32_t)fd;
}
inline constexpr int io_tag_fd(uint64_t tag) noexcept {
    return (int)(uint32_t)tag;
}
inline constexpr uint32_t io_tag_gen(uint64_t tag) noexcept {
    return (uint32_t)(tag >> 32);
}
/* A backend's own tag (timerfd, internal SQEs): generation 0 names no registration. */
inline constexpr uint64_t kBackendTag = UINT64_MAX >> 32;

/* The requests a completion backend makes for streams and listeners carry
 * their registration's tag with the request's kind in the top two bits
 * (generations stay below 2^30, so a registration's own tag has kind 0 and
 * a tagged request never passes io_current() as a registration). */
enum : unsigned { REQ_POLL = 0, REQ_RECV = 1, REQ_SEND = 2, REQ_ACCEPT = 3 };
inline constexpr uint32_t kMaxGen = (1u << 30) - 1;
inline constexpr uint64_t req_tag(uint64_t tag, unsigned kind) noexcept {
    return tag | (uint64_t)kind << 62;
}
inline constexpr unsigned req_kind(uint64_t tag) noexcept {
    return (unsigned)(tag >> 62);
}
inline constexpr uint64_t req_base(uint64_t tag) noexcept {
    return tag & ~(3ull << 62);
}

/* TL_READ/TL_WRITE <-> poll(2) bits. epoll's EPOLLIN/OUT/PRI/ERR/HUP/RDHUP
 * have the same values as poll's, so one pair serves both backends. */
inline constexpr uint32_t kPollIn = 0x001, kPollPri = 0x002, kPollOut = 0x004, kPollErr = 0x008,
                          kPollHup = 0x010, kPollNval = 0x020;

inline uint32_t poll_bits(unsigned events) noexcept {
    return (events & TL_READ ? kPollIn : 0u) | (events & TL_WRITE ? kPollOut : 0u);
}

/* The one mapping both backends use. POLLRDHUP (the peer shut down its
 * writing side) is not TL_HUP: the connection still takes writes, and the
 * half-close shows as TL_READ with read() returning 0, as with epoll, which
 * reports RDHUP only when asked (tickloop never asks). io_uring adds RDHUP
 * to every poll, so it must be ignored here. POLLNVAL (io_uring only: the
 * fd was closed under the poll) is an error. */
inline unsigned tl_events(uint32_t bits) noexcept {
    unsigned r = 0;
    if (bits & (kPollIn | kPollPri)) r |= TL_READ;
    if (bits & kPollOut) r |= TL_WRITE;
    if (bits & (kPollErr | kPollNval)) r |= TL_ERROR;
    if (bits & kPollHup) r |= TL_HUP;
    return r;
}

/* The intrusive lists of asyncs and signal watchers (`next`/`prev` fields).
 * Dispatch walks one with a cursor that unlink advances, so a callback may
 * unlink (and free) any node, the one running included. */
template <class Node>
void list_push(Node *&head, Node *node) noexcept {
    node->prev = nullptr;
    node->next = head;
    if (head) head->prev = node;
    head = node;
}

template <class Node>
void list_unlink(Node *&head, Node *&cursor, Node *node) noexcept {
    if (cursor == node) cursor = node->next;
    if (node->prev)
        node->prev->next = node->next;
    else
        head = node->next;
    if (node->next) node->next->prev = node->prev;
    node->next = node->prev = nullptr;
}

/* A list kept in start order (append at the tail), for the handles whose
 * callbacks must run in start order: asyncs and hooks. Same cursor rule as
 * above. */
template <class Node>
struct OrderedList {
    Node *head = nullptr, *tail = nullptr;
    Node *cursor = nullptr; /* next node to visit during dispatch */

    void append(Node *node) noexcept {
        node->next = nullptr;
        node->prev = tail;
        if (tail)
            tail->next = node;
        else
            head = node;
        tail = node;
    }
    void unlink(Node *node) noexcept {
        if (cursor == node) cursor = node->next;
        if (node->prev)
            node->prev->next = node->next;
        else
            head = node->next;
        if (node->next)
            node->next->prev = node->prev;
        else
            tail = node->prev;
        node->next = node->prev = nullptr;
    }
};

template <class Node>
bool list_contains(const Node *head, const Node *node) noexcept {
    for (; head; head = head->next)
        if (head == node) return true;
    return false;
}

/* One entry of the loop's fd registry, loop->io_slots[fd] (libuv's
 * loop->watchers[]). `watcher` is the active watcher of fd, or null; only
 * loop/io.cc writes it (everything else reads it). `state` and `index` belong
 * to the I/O backend (io_uring keeps its armed/queued bits and its re-arm
 * queue position there); the loop zeroes them before add() and never reads
 * them. */
struct IoSlot {
    tl_io *watcher;
    uint32_t state;
    uint32_t index;
};

/* A readiness poller working against the loop's fd registry.
 * Level-triggered: an fd that stays ready is reported by every wait. Events
 * carry io_tag(fd, watcher->gen) of the registration they belong to; tags
 * with generation 0 are a backend's own and never name a registration.
 *
 * Preconditions the loop guarantees (and a backend may rely on):
 * - add(fd): io_slots[fd].watcher is the watcher being started, with fd,
 *   events (TL_READ|TL_WRITE, non-empty) and a fresh gen set; state and
 *   index are 0; no other registration of fd exists. fd was open a moment
 *   ago. On failure the loop clears the slot again.
 * - modify(fd, events): fd is registered (add succeeded, no remove since);
 *   watcher->events still holds the old events, and the loop stores the new
 *   ones only after modify returns 0. The fd may have been closed.
 * - remove(fd): fd is registered; the slot still holds the watcher, and the
 *   loop clears it after remove returns. The fd may already be closed (that
 *   is not an error; remove cannot fail).
 * - wait(): not reentrant; no callback runs inside it.
 * - A backend may rebuild its kernel state from the registry at any time
 *   (io_readd_all: epoll does when it holds a registration it cannot
 *   delete); tl_loop_fork gives every registration to a fresh backend the
 *   same way. A slot's state and index are zeroed before each such add.
 * Errors are negative errnos. add/modify return -EBADF (not open), -EPERM
 * (the kernel cannot poll this file: regular files, directories, /dev/null),
 * -ENOMEM; never -EBUSY: a full submission queue is the backend's problem. */
class IoBackend : public MallocNew {
public:
    virtual ~IoBackend() = default;
    virtual const char *name() const noexcept = 0;
    /* TL_IO_EPOLL or TL_IO_URING: what tl_loop_fork creates again. */
    virtual tl_io_kind kind() const noexcept = 0;
    virtual int add(int fd) noexcept = 0;
    virtual int modify(int fd, unsigned events) noexcept = 0;
    virtual void remove(int fd) noexcept = 0;
    /* The descriptor a host loop polls to learn that this backend has events
       (tl_loop_fd): readable while a wait(0) would return some. Created on
       first use where it is not the backend's own; a negative errno if that
       fails. */
    virtual int poll_fd() noexcept = 0;
    /* True while a host must not block on poll_fd(): requests queued that
       the kernel has not been handed yet (io_uring's SQEs and re-arms ride on
       the next wait), or completions already waiting for an iteration (in
       the CQ, or as deferred task work) whose signal the loop may have
       drained. tl_loop_timeout then flushes, and says 0 if that leaves any. */
    virtual bool needs_enter() const noexcept { return false; }
    /* Hands queued requests to the kernel without waiting. 0 or a negative
       errno. */
    virtual int flush() noexcept { return 0; }
    /* Waits until the absolute CLOCK_MONOTONIC time deadline_ns at most
       (UINT64_MAX: no limit; 0, or any time already past: never blocks) and
       stores up to cap ready events in out. Returns their number, -EINTR if a
       signal handler interrupted the wait, or another negative errno. An
       absolute deadline lets the caller retry an interrupted wait with the
       same argument: a retry can never extend it, and time spent between the
       loop's clock read and the syscall (callbacks, preemption) never
       lengthens a wait. */
    virtual int wait(uint64_t deadline_ns, ReadyEvent *out, int cap) noexcept = 0;

    /* The completion path of streams and listeners (loop/stream.cc; io_uring
       only). A stream or listener registration never gets add()'s poll on
       that path: add() re-arms its requests instead (stream_readd), and
       remove() cancels them. Requests complete as ReadyEvents with revents
       kCompletion | kind, tag io_tag(fd, gen), and the CQE's res and
       flags. A completion for a registration that is gone is handled
       by the backend (buffer returned, accepted socket closed), or by
       stream_stale if the loop drops it. */
    /* Allocates the read buffers and fills the ring (first reading stream):
       0, -ENOMEM. */
    virtual int stream_buffers() noexcept { return -ENOSYS; }
    /* Arms a multishot receive (REQ_RECV) for fd's registration. */
    virtual int stream_recv(int fd) noexcept {
        (void)fd;
        return -ENOSYS;
    }
    /* Submits one send (REQ_SEND) of len bytes at buf, MSG_NOSIGNAL. */
    virtual int stream_send(int fd, const void *buf, uint32_t len) noexcept {
        (void)fd, (void)buf, (void)len;
        return -ENOSYS;
    }
    /* Arms a multishot accept (REQ_ACCEPT), NONBLOCK|CLOEXEC sockets. */
    virtual int listener_accept(int fd) noexcept {
        (void)fd;
        return -ENOSYS;
    }
    /* Cancels fd's request of that kind (its last CQE still arrives). */
    virtual void stream_cancel(int fd, unsigned kind) noexcept { (void)fd, (void)kind; }
    /* A buffer a receive completion named; its return to the ring. */
    virtual const void *buffer(uint32_t bid) noexcept {
        (void)bid;
        return nullptr;
    }
    virtual void buffer_release(uint32_t bid) noexcept { (void)bid; }
    /* A per-stream FIFO of received buffers held while the stream does not
       read (chain: 0 when empty), through arrays the backend owns. */
    virtual void buffer_park(uint32_t *chain, uint32_t bid, uint32_t len) noexcept {
        (void)chain, (void)bid, (void)len;
    }
    virtual bool buffer_unpark(uint32_t *chain, uint32_t *bid, uint32_t *len) noexcept {
        (void)chain, (void)bid, (void)len;
        return false;
    }
};

/* A fresh CLOCK_MONOTONIC read, in ns. */
inline uint64_t monotonic_ns() noexcept {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* For a backend that can only wait for a duration: what remains until
   deadline_ns (finite, non-zero) from a fresh clock read, 0 if it passed. */
inline uint64_t remaining_ns(uint64_t deadline_ns) noexcept {
    uint64_t now = monotonic_ns();
    return deadline_ns > now ? deadline_ns - now : 0;
}

/* Both bind the backend to `loop` (its registry and stats) for its life. */
int epoll_backend_create(tl_loop *loop, IoBackend **out) noexcept;
/* -ENOSYS without liburing or on a kernel too old; the kernel's errno when
   io_uring is refused (-EPERM from seccomp or kernel.io_uring_disabled). */
int uring_backend_create(tl_loop *loop, IoBackend **out) noexcept;

/* tl_timer::flags, owned by the loop. Layout (one word, 32 bits):
 *   bit 0      TIMER_ACTIVE  inside a backend instance, or in the ready or the
 *                            deferred list
 *   bit 1      TIMER_QUEUED  in the loop's ready list (popped, callback not run
 *                            yet); only with TIMER_ACTIVE
 *   bit 2      TIMER_UNREF   tl_timer_set_ref(.., 0); kept across stop/start
 *   bit 3      TIMER_DEFERRED in the loop's deferred list (started during a
 *                            dispatch, already due); only with TIMER_ACTIVE
 *   bit 4      TIMER_PERIODIC started by tl_timer_start_at with a period: re-armed
 *                            at deadline + k * repeat, not now + repeat
 *   bit 5      TIMER_FRESH   inside its instance, started during a dispatch
 *                            with a deadline it could still pop, on a backend
 *                            without reserve (timer.cc): popped by that
 *                            dispatch, it waits in the deferred list for the
 *                            next one
 *   bits 6-7   TIMER_FRESH_EPOCH that dispatch, the low bits of its count
 *   bits 8-9   the tl_clock it was started on (TIMER_CLOCK_SHIFT)
 *   bit 10     TIMER_LOOP_LEEWAY the leeway bits hold the loop's collect
 *                            interval (the timer has none of its own); set at
 *                            start, cleared when it becomes inactive
 *   bits 11-31 the leeway, 16-bit mantissa and 5-bit exponent (timers/timers.h,
 *              which the backends read it through)
 * tl_timer_init zeroes the word. The loop writes it with read-modify-write
 * only (`|=`, `&= ~`), so bits it does not own here survive start, stop and
 * dispatch; TIMER_STATE is what "not scheduled" clears. */
enum : uint32_t {
    TIMER_ACTIVE = 1u << 0,
    TIMER_QUEUED = 1u << 1,
    /* tl_timer_set_ref(.., 0): does not keep the loop alive. Kept across
       stop/start: only tl_timer_init clears it. */
    TIMER_UNREF = 1u << 2,
    TIMER_DEFERRED = 1u << 3,
    TIMER_PERIODIC = 1u << 4,
    TIMER_FRESH = 1u << 5,
    TIMER_FRESH_EPOCH_SHIFT = 6,
    TIMER_FRESH_EPOCH = 3u << TIMER_FRESH_EPOCH_SHIFT,
    TIMER_FRESH_BITS = TIMER_FRESH | TIMER_FRESH_EPOCH,
    TIMER_STATE = TIMER_ACTIVE | TIMER_QUEUED | TIMER_DEFERRED,
    TIMER_LOOP_LEEWAY = kLentLeeway,
    TIMER_CLOCK_SHIFT = 8,
    TIMER_CLOCK_MASK = 3u << TIMER_CLOCK_SHIFT,
};
/* tl_timer::reserved while the timer is active: the owning loop's id mixed
 * with the timer's own address. A handle used with another loop is refused
 * by comparing it; and tl_timer_init, which gets no loop pointer, finds the
 * loop of an active timer from it (loop_by_id), while a copy of an active
 * timer, or fresh memory whose flags happen to say TIMER_ACTIVE, yields an id
 * that names no live loop but by a 1 in 2^32 chance. */
inline uint32_t timer_owner(uint32_t loop_id, const tl_timer *t) noexcept {
    return loop_id ^ (uint32_t)(reinterpret_cast<uintptr_t>(t) >> 3);
}
inline constexpr unsigned timer_clock(const tl_timer *t) noexcept {
    return (t->flags & TIMER_CLOCK_MASK) >> TIMER_CLOCK_SHIFT;
}
static_assert((TIMER_CLOCK_MASK & kLeewayMask) == 0, "clock and leeway bits do not overlap");

/* tl_io::flags. */
enum : uint32_t {
    IO_ACTIVE = 1u << 0,
    IO_INTERNAL = 1u << 1, /* the loop's own (async eventfd, signalfd): keeps nothing alive */
    IO_UNREF = 1u << 2,    /* tl_io_set_ref(.., 0); kept across stop/start   */
    IO_STREAM = 1u << 3,   /* the registration of a tl_stream (loop/stream.cc) */
    IO_LISTENER = 1u << 4, /* the registration of a tl_listener                */
    IO_HANDLE_KINDS = IO_STREAM | IO_LISTENER,
};

/* tl_hook::flags. */
enum : uint32_t {
    HOOK_ACTIVE = 1u << 0,
    HOOK_UNREF = 1u << 1,
};
inline constexpr int kHookKinds = 3; /* PREPARE, CHECK, IDLE */

/* tl_async::magic and tl_signal::magic: a per-type marker in the high 24 bits
 * (so fresh memory is unlikely to pass for a handle) and state bits in the
 * low 8. HANDLE_INIT says the handle went through tl_*_init, so its ACTIVE bit
 * can be trusted without walking the loop's list. */
enum : uint32_t {
    HANDLE_ACTIVE = 1u << 0,
    HANDLE_INIT = 1u << 1,
    HANDLE_UNREF = 1u << 2,
    HANDLE_STATE_MASK = 0xffu,
};

/* Events collected per wait. Level-triggered polling reports the rest next
   iteration; 256 is libev's and libuv's order of magnitude. */
inline constexpr int kMaxEvents = 256;

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
    uint64_t timer_slack_ns;       /* 0: leave alone                           */
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
    uint64_t stream_unref; /* bound streams and started listeners that are unreferenced */
    void *read_buf;        /* the readiness path's one read buffer; null until used */
    uint32_t read_buffer_size, read_buffer_count;
    bool streams_completion; /* io_uring completion path (else readiness)       */
    uint32_t accepts_paused; /* listeners paused after an accept error          */
    tl_timer accept_timer;   /* resumes them (unreferenced, started on demand) */

    tl_loop_stats stats; /* counters; the *_active fields are kept live */
    tl::detail::ReadyEvent events[tl::detail::kMaxEvents];
    tl::detail::LatenessHistogram lateness; /* cold: 7.8 KB, last */
};

namespace tl::detail {
/* The live loop whose id is id, or null (lifecycle.cc keeps the list: loops
   register in tl_loop_new and leave in tl_loop_free). Any thread. */
tl_loop *loop_by_id(uint32_t id) noexcept;
/* Runs the callbacks for n collected events; returns how many ran. */
uint64_t io_dispatch(tl_loop *loop, int n) noexcept;
/* Starts an internal watcher (does not keep the loop alive). */
int io_start_internal(tl_loop *loop, tl_io *w, int fd, tl_io_cb cb) noexcept;
void io_stop_internal(tl_loop *loop, tl_io *w) noexcept;
/* loop/clock.cc. A read of clock c as the loop sees it (the test seam's,
   if set). */
uint64_t read_clock(const tl_loop *loop, unsigned c) noexcept;
/* Opens clock c's timerfd and creates its domain's instance, if missing;
   0 or -errno. Nothing to do for the wait's domain. */
int clock_prepare(tl_loop *loop, unsigned c) noexcept;
/* Makes clock c's timerfd expire no later than wake (absolute, on c); nothing
   under the test seam. */
void clock_arm(tl_loop *loop, unsigned c, uint64_t wake) noexcept;
/* Closes the timerfds. */
void clock_close(tl_loop *loop) noexcept;
int clock_fork(tl_loop *loop) noexcept;
/* Releases what async.cc and signal.cc hold (the loop has no active handle). */
void async_close(tl_loop *loop) noexcept;
void signal_close(tl_loop *loop) noexcept;
void io_close(tl_loop *loop) noexcept;
/* The registration fd's tag names, or null if it names none any more
   (stopped, or stopped and replaced on a reused fd number). */
IoSlot *io_current(tl_loop *loop, uint64_t tag) noexcept;
/* Gives every registration to io, tags unchanged: a fresh backend
   (tl_loop_fork), or one that has just replaced its kernel object. Returns 0 or the first error
   other than -EBADF; a watcher whose fd was closed without tl_io_stop cannot be added again: it
   stays active and gets no more events, as a closed fd gets none from epoll. */
int io_readd_all(tl_loop *loop, IoBackend *io) noexcept;
/* An error the loop hid from the caller (an internal completion failed):
   counted in the stats, and fatal in debug builds, where it is a bug. */
void io_internal_error(tl_loop *loop, const char *what, int err) noexcept;
/* The fd registry for streams and listeners (io.cc): register w (fd, flags
   IO_STREAM or IO_LISTENER) with no events and without telling the I/O
   backend; -EBUSY if fd is taken, -EBADF if it is not open. io_interest then
   sets the readiness the backend waits for (0: none: the backend forgets the
   fd, so that a hung-up idle socket cannot make the loop spin); io_unregister
   drops the registration. Handle counts are the caller's. */
int io_register(tl_loop *loop, tl_io *w, uint32_t kind) noexcept;
int io_interest(tl_loop *loop, tl_io *w, unsigned events) noexcept;
void io_unregister(tl_loop *loop, tl_io *w) noexcept;
/* stream.cc: an event (readiness, or a completion on io_uring) for a
   stream's or listener's registration. */
void stream_event(tl_loop *loop, tl_io *w, const ReadyEvent &ev) noexcept;
/* A completion the loop dropped (its registration is gone): returns its
   buffer, closes an accepted socket. */
void stream_stale(tl_loop *loop, const ReadyEvent &ev) noexcept;
/* Completion path: gives the requests of a stream or listener registration
   to io (a fresh backend after tl_loop_fork, or io_readd_all). */
int stream_readd(tl_loop *loop, IoBackend *io, tl_io *w) noexcept;
/* Runs the callbacks that streams have due (completed writes, closes): after
   the iteration's I/O callbacks. Streams made pending meanwhile wait for the
   next iteration, which then does not block. */
uint64_t streams_run_pending(tl_loop *loop) noexcept;
inline bool streams_pending(const tl_loop *loop) noexcept {
    return loop->stream_pending_head != nullptr;
}
/* Validates and applies the read-buffer options; -EINVAL if out of range. */
int streams_configure(tl_loop *loop, const tl_loop_options *opts) noexcept;
void streams_close(tl_loop *loop) noexcept;

/* Runs the active hooks of one kind in start order (hook.cc). */
void hooks_run(tl_loop *loop, tl_hook_kind kind) noexcept;
/* slack.cc: tl_loop_options.timer_slack_ns on the thread that runs the loop:
   applied at the start of each run (loop.cc), released when the loop is
   freed (lifecycle.cc). */
void apply_timer_slack(tl_loop *loop) noexcept;
void release_timer_slack(tl_loop *loop) noexcept;
/* tl_loop_fork's steps for the loop's own descriptors: each creates a new
   kernel object, moves its internal watcher onto it (io_replace_fd; the new
   I/O backend then sees it among the registrations) and closes the inherited
   one. */
int async_fork(tl_loop *loop) noexcept;
int signal_fork(tl_loop *loop) noexcept;
/* tl_loop_fork's first step: a child after fork() starts owning no signal
   (signal.cc), and the inherited loop takes each signal it watches again.
   Stores in *taken those it took now (none that it held already, as in the
   process that created it). Returns 0, or -EEXIST (another loop of the
   process has one of them) with nothing taken. signal_release gives back
   *taken, when a later step fails. */
int signal_retake(tl_loop *loop, sigset_t *taken) noexcept;
void signal_release(tl_loop *loop, const sigset_t *taken) noexcept;
/* Moves the registration of internal watcher w from its fd to new_fd, a
   descriptor just created (so open, and not w->fd): the registry slot of
   w->fd is cleared, the new descriptor's holds w with state and index 0,
   w->fd becomes it, and w keeps its generation. If a watcher is filed under
   new_fd's number (one whose fd the program closed without stopping it),
   the descriptor is first moved above the registry (F_DUPFD_CLOEXEC) and
   new_fd closed, so that that watcher's stop cannot clear w's slot. The I/O
   backend is not told: the fork steps give the whole registry to a fresh
   backend afterwards (io_readd_all). The caller closes the old descriptor.
   Returns the descriptor w now watches (new_fd or its duplicate), or a
   negative errno (duplicating the descriptor or growing the registry
   failed) with nothing changed: new_fd is still the caller's. */
int io_replace_fd(tl_loop *loop, tl_io *w, int new_fd) noexcept;

/* The loop's invariant walker (tests call it; libev's ev_verify): the fd
   table, the async, signal and hook lists against the handle counts and the
   start order. nullptr if they hold, else what broke. Hidden, like
   tl_detail_timers_check. */
extern "C" const char *tl_detail_loop_check(const tl_loop *loop) noexcept;

/* Test seam (hidden, reached by linking the static library): the loop reads
   every clock through read(clock, ctx) instead of clock_gettime, so a test
   drives time (run the loop with TL_RUN_NOWAIT then: the kernel's waits still
   use the real clock). NULL read restores the real clocks. */
extern "C" void tl_detail_loop_set_clock(tl_loop *loop, tl_detail_clock_fn read,
                                         void *ctx) noexcept;
/* Runs the loop's reaction to a wall-clock set or step, exactly as when the
   kernel reports one (a REALTIME timerfd read failing with ECANCELED). */
extern "C" void tl_detail_loop_clock_changed(tl_loop *loop) noexcept;

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

/* Debug builds walk the loop's own state (the timer domains and the ready
 * and deferred lists against their flags, the fd table against its watchers,
 * the async, signal and hook lists: verify.cc lists the invariants) after every
 * timer operation, every timer callback and every iteration, and abort with
 * the first broken invariant and the call that broke it (libev's
 * EV_FREQUENT_CHECK); the timer backend's glue walks the backend's structure
 * after each of its operations (timers/backend_glue.h). The walks are O(n):
 * up to kVerifyEveryOpUpTo entries they run every time, above it once per
 * n / kVerifyAmortized calls, so the tests with a million timers stay linear.
 * Release builds (NDEBUG) compile all of it away. */
#ifndef NDEBUG
inline constexpr uint64_t kVerifyEveryOpUpTo = 64;
inline constexpr uint64_t kVerifyAmortized = 4;
void loop_verify(tl_loop *loop, const char *where) noexcept;
/* A timer pop_expired just returned: never early by the backend's own rule
   (exactly at its deadline with TL_TIMER_CAP_EXACT, else by tick), in
   (deadline, insertion) order after the previous pop for EXACT backends. */
void check_popped(tl_loop *loop, const tl_timer *t, uint64_t now, bool first) noexcept;
#define TL_DEBUG_VERIFY(loop, where) ::tl::detail::loop_verify(loop, where)
#define TL_DEBUG_CHECK_POPPED(loop, t, now, first) ::tl::detail::check_popped(loop, t, now, first)
#else
#define TL_DEBUG_VERIFY(loop, where) ((void)0)
#define TL_DEBUG_CHECK_POPPED(loop, t, now, first) ((void)0)
#endif

/* A loop belongs to one thread. Debug builds catch a call from another thread
 * while the loop runs (undefined behaviour otherwise) and abort with a message
 * naming the call; release builds pay nothing. */
#ifndef NDEBUG
void check_loop_thread(const tl_loop *loop, const char *call) noexcept;
#define TL_CHECK_LOOP_THREAD(loop) ::tl::detail::check_loop_thread(loop, __func__)
#else
#define TL_CHECK_LOOP_THREAD(loop) ((void)0)
#endif
} // namespace tl::detail

#endif /* TICKLOOP_LOOP_LOOP_INTERNAL_H */
