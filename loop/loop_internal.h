/*
 * Internal to loop/: the loop's private state and the small interface every
 * I/O backend (epoll.cc, and io_uring later) implements.
 */
#ifndef TICKLOOP_LOOP_LOOP_INTERNAL_H
#define TICKLOOP_LOOP_LOOP_INTERNAL_H

#include <csignal>
#include <cstdint>
#include <pthread.h>

#include "tickloop/timer_backend.h"

namespace tl::detail {

/* One readiness report from an I/O backend: the tag given at registration
 * (fd in the low half, registration generation in the high half) and
 * TL_READ|TL_WRITE|TL_ERROR|TL_HUP. */
struct ReadyEvent {
    uint64_t tag;
    unsigned revents;
};

inline constexpr uint64_t io_tag(int fd, uint32_t gen) noexcept {
    return (uint64_t)gen << 32 | (uint32_t)fd;
}
inline constexpr int io_tag_fd(uint64_t tag) noexcept {
    return (int)(uint32_t)tag;
}
inline constexpr uint32_t io_tag_gen(uint64_t tag) noexcept {
    return (uint32_t)(tag >> 32);
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

template <class Node>
bool list_contains(const Node *head, const Node *node) noexcept {
    for (; head; head = head->next)
        if (head == node) return true;
    return false;
}

/* One entry of the loop's fd registry, loop->io_slots[fd] (loop/io.cc owns
 * it; libuv's loop->watchers[]). `watcher` is the active watcher of fd, or
 * null. `state` and `index` belong to the I/O backend (io_uring keeps its
 * armed/queued bits and its re-arm queue position there); the loop zeroes
 * them before add() and never reads them. */
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
 * - reopen(): drops every registration together with the kernel object
 *   holding them (epoll set, ring) and makes a fresh, empty one; the loop
 *   then calls add() again for every slot (io_readd_all). Used after fork
 *   and when epoll must get rid of a registration it cannot delete.
 * Errors are negative errnos. add/modify return -EBADF (not open), -EPERM
 * (the kernel cannot poll this file: regular files, directories, /dev/null),
 * -ENOMEM; never -EBUSY: a full submission queue is the backend's problem. */
class IoBackend {
public:
    virtual ~IoBackend() = default;
    virtual const char *name() const noexcept = 0;
    virtual int add(int fd) noexcept = 0;
    virtual int modify(int fd, unsigned events) noexcept = 0;
    virtual void remove(int fd) noexcept = 0;
    /* Waits at most timeout_ns (UINT64_MAX: no limit, 0: never blocks) and
       stores up to cap ready events in out. Returns their number, -EINTR if a
       signal handler interrupted the wait, or another negative errno. */
    virtual int wait(uint64_t timeout_ns, ReadyEvent *out, int cap) noexcept = 0;
    virtual int reopen() noexcept = 0;
};

/* Both bind the backend to `loop` (its registry and stats) for its life. */
int epoll_backend_create(tl_loop *loop, IoBackend **out) noexcept;
/* -ENOSYS without liburing or on a kernel too old; the kernel's errno when
   io_uring is refused (-EPERM from seccomp or kernel.io_uring_disabled). */
int uring_backend_create(tl_loop *loop, IoBackend **out) noexcept;

/* tl_timer::flags, owned by the loop. */
enum : uint32_t {
    TIMER_ACTIVE = 1u << 0, /* scheduled: inside the backend                   */
    /* Started during the timer dispatch whose epoch is in the high bits, with
       a deadline that dispatch could pop; it must wait for the next one. */
    TIMER_FRESH = 1u << 1,
    TIMER_EPOCH_SHIFT = 8,
};

/* tl_io::flags. */
enum : uint32_t {
    IO_ACTIVE = 1u << 0,
    IO_INTERNAL = 1u << 1, /* the loop's own (async eventfd, signalfd): keeps nothing alive */
};

/* Events collected per wait. Level-triggered polling reports the rest next
   iteration; 256 is libev's and libuv's order of magnitude. */
inline constexpr int kMaxEvents = 256;

} // namespace tl::detail

struct tl_loop {
    /* Hot: read on every timer start and every iteration. */
    uint64_t now;
    const tl_timer_backend *timer_backend;
    void *timers;
    tl::detail::IoBackend *io;
    uint32_t id;   /* non-zero, unique per process: tags handles' owner */
    bool running;  /* inside tl_loop_run                                */
    bool stopping; /* tl_loop_stop called                               */
    bool in_timer_dispatch;
    uint32_t dispatch_epoch; /* bumped per timer dispatch                */
    uint64_t active_handles; /* timers, user I/O, asyncs, signals        */
    uint64_t max_timers;     /* 0: unlimited                             */
    uint64_t max_timers_per_iteration;
    uint64_t timer_slack_ns; /* 0: leave alone                           */
    pthread_t run_thread;    /* valid while running: debug thread check  */

    /* I/O: the fd registry (loop/io.cc), so a stale event never reaches a
       stopped watcher; both I/O backends work against it. */
    tl::detail::IoSlot *io_slots;
    size_t io_slots_size;
    size_t io_count; /* registrations (slots with a watcher)      */
    uint32_t io_gen; /* last generation given; never 0 in a tag   */

    /* Async: one eventfd for all tl_async of this loop. */
    int async_fd;
    tl_io async_watcher;
    tl_async *asyncs;
    tl_async *async_cursor; /* next to visit during dispatch */

    /* Signals: one signalfd for every watched signal. */
    int signal_fd;
    tl_io signal_watcher;
    tl_signal *signals;
    tl_signal *signal_cursor;
    sigset_t signal_mask;            /* signals in the signalfd   */
    uint32_t signal_watchers[_NSIG]; /* watchers per signal       */

    /* timer_slack_ns applied to run_thread's slack by this loop (loop.cc). */
    bool slack_applied;
    pthread_t slack_thread;

    tl_loop_stats stats;
    tl::detail::ReadyEvent events[tl::detail::kMaxEvents];
};

namespace tl::detail {
/* Runs the callbacks for n collected events; returns how many ran. */
uint64_t io_dispatch(tl_loop *loop, int n) noexcept;
/* Starts an internal watcher (does not keep the loop alive). */
int io_start_internal(tl_loop *loop, tl_io *w, int fd, tl_io_cb cb) noexcept;
void io_stop_internal(tl_loop *loop, tl_io *w) noexcept;
/* Runs every due timer; returns how many callbacks ran. */
uint64_t timers_dispatch(tl_loop *loop) noexcept;
/* Releases what async.cc and signal.cc hold (the loop has no active handle). */
void async_close(tl_loop *loop) noexcept;
void signal_close(tl_loop *loop) noexcept;
void io_close(tl_loop *loop) noexcept;
/* The registration fd's tag names, or null if it names none any more
   (stopped, or stopped and replaced on a reused fd number). */
IoSlot *io_current(tl_loop *loop, uint64_t tag) noexcept;
/* After loop->io->reopen(): adds every registration again. Returns 0, or the
   first error; a watcher whose fd was closed without tl_io_stop cannot be
   added again: it stays active and gets no more events, as a closed fd gets
   none from epoll. */
int io_readd_all(tl_loop *loop) noexcept;
/* An error the loop hid from the caller (an internal completion failed):
   counted in the stats, and fatal in debug builds, where it is a bug. */
void io_internal_error(tl_loop *loop, const char *what, int err) noexcept;

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
