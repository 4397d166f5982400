/* SPDX-License-Identifier: MIT */
/*
 * Signal watchers through one signalfd per loop.
 *
 * A signal is delivered to a signalfd only while it is blocked, so the first
 * watcher of a signal in a loop adds it to the loop's signalfd mask and the
 * last one removes it. The blocked state belongs to the thread, not the loop:
 * several loops of one thread may watch the same signal, and the signal must
 * stay blocked until the last of them stops. So the thread keeps a count per
 * signal of the loops watching it (ThreadSignals); the first blocks it
 * (remembering whether it was blocked already), the last restores that. A
 * signal that arrived and is still pending at that point is then delivered
 * the ordinary way, as if no loop had watched it.
 *
 * A signal is watched by one loop at a time, process-wide: two loops watching
 * it would compete for each instance (it goes to whichever reads it first),
 * so a start on a second loop is refused with -EEXIST while the first has a
 * watcher of it (signal_owner). Several watchers of one signal in one loop
 * all run.
 *
 * That ownership belongs to the process. A child after fork() inherits
 * copies of the parent's loops that it may never use (a pre-fork server's
 * workers watch SIGTERM on loops of their own), so it starts owning
 * nothing: a pthread_atfork child handler clears the table, and
 * tl_loop_fork on an inherited loop takes its signals again
 * (signal_retake), failing with -EEXIST if a loop of the child has one of
 * them by then. Until then the inherited loop's signalfd is the parent's
 * too, so a stop there leaves that descriptor's mask alone.
 */
#include <atomic>
#include <cerrno>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "loop/handle_flags.h"
#include "loop/io/io.h"
#include "loop/list.h"
#include "loop/signal.h"
#include "loop/state.h"
#include "loop/verify.h"

using namespace tl::detail;

namespace {

/* State lives in `magic` as for asyncs (async.cc's comment): a marker and
 * HANDLE_* bits; HANDLE_INIT makes the ACTIVE bit trusted without a list walk. */
constexpr uint32_t kSignalMarker = 0x7a5c2e00u;

bool is_marked(uint32_t magic) noexcept {
    return (magic & ~HANDLE_STATE_MASK) == kSignalMarker;
}

bool is_active(const tl_loop *loop, const tl_signal *s) noexcept {
    if (!is_marked(s->magic) || !(s->magic & HANDLE_ACTIVE)) return false;
    if (s->magic & HANDLE_INIT) return true;
    return s->loop != loop || list_contains(loop->signals, s);
}

/* The loop (its id) watching each signal in this process, 0: none.
   Process-wide, as the signals are; emptied in a child after fork(). */
std::atomic<uint32_t> signal_owner[_NSIG];

void forget_signals_in_child() {
    for (std::atomic<uint32_t> &owner : signal_owner) owner.store(0, std::memory_order_relaxed);
}

/* The child handler is registered before the first claim, so that a fork
   after any claim runs it; a failed registration is tried again at the
   next claim (and that claim fails). */
pthread_mutex_t atfork_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> atfork_registered{false};

int register_atfork() noexcept {
    if (atfork_registered.load(std::memory_order_acquire)) return 0;
    pthread_mutex_lock(&atfork_lock);
    int r = 0;
    if (!atfork_registered.load(std::memory_order_relaxed)) {
        r = -pthread_atfork(nullptr, nullptr, forget_signals_in_child);
        if (r == 0) atfork_registered.store(true, std::memory_order_release);
    }
    pthread_mutex_unlock(&atfork_lock);
    return r;
}

/* Takes signo for loop: 1 if taken now, 0 if the loop had it already,
   -EEXIST if another loop has it, -ENOMEM if the child handler could not be
   registered. */
int claim_signal(const tl_loop *loop, int signo) noexcept {
    int r = register_atfork();
    if (r < 0) return r;
    uint32_t none = 0;
    if (signal_owner[signo].compare_exchange_strong(none, loop->id, std::memory_order_acq_rel))
        return 1;
    return none == loop->id ? 0 : -EEXIST;
}

/* Gives signo up if loop has it; false if it did not (a loop inherited
   across fork() that tl_loop_fork has not taken back). */
bool release_signal(const tl_loop *loop, int signo) noexcept {
    uint32_t mine = loop->id;
    return signal_owner[signo].compare_exchange_strong(mine, 0, std::memory_order_acq_rel);
}

/* Per thread, because the signal mask is (pthread_sigmask). */
struct ThreadSignals {
    uint32_t loops[_NSIG];   /* loops of this thread watching the signal  */
    sigset_t blocked_before; /* blocked before the first of them started */
};
thread_local ThreadSignals thread_signals;

void thread_watch(int signo) noexcept {
    if (thread_signals.loops[signo]++ > 0) return;
    sigset_t one, old;
    sigemptyset(&one);
    sigaddset(&one, signo);
    pthread_sigmask(SIG_BLOCK, &one, &old);
    if (sigismember(&old, signo))
        sigaddset(&thread_signals.blocked_before, signo);
    else
        sigdelset(&thread_signals.blocked_before, signo);
}

void thread_unwatch(int signo) noexcept {
    if (thread_signals.loops[signo] == 0 || --thread_signals.loops[signo] > 0) return;
    if (sigismember(&thread_signals.blocked_before, signo)) return;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signo);
    pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
}

bool valid_signo(int signo) noexcept {
    if (signo < 1 || signo >= _NSIG || signo == SIGKILL || signo == SIGSTOP) return false;
    /* glibc reserves the first real-time signals for itself. */
    return signo < 32 || signo >= SIGRTMIN;
}

void dispatch(tl_loop *loop, int signo) {
    for (tl_signal *s = loop->signals; s; s = loop->signal_cursor) {
        loop->signal_cursor = s->next;
        if (s->signo == signo) s->cb(loop, s, signo);
    }
    loop->signal_cursor = nullptr;
}

void on_signalfd(tl_loop *loop, tl_io *, unsigned) {
    struct signalfd_siginfo info[16];
    for (;;) {
        ssize_t n = read(loop->signal_fd, info, sizeof info);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (size_t i = 0; i < (size_t)n / sizeof info[0]; ++i)
            dispatch(loop, (int)info[i].ssi_signo);
        if ((size_t)n < sizeof info) break;
    }
}

} // namespace

namespace tl::detail {

void signal_close(tl_loop *loop) noexcept {
    if (loop->signal_fd < 0) return;
    io_stop_internal(loop, &loop->signal_watcher);
    close(loop->signal_fd);
    loop->signal_fd = -1;
}

int signal_retake(tl_loop *loop, sigset_t *taken) noexcept {
    sigemptyset(taken);
    for (int signo = 1; signo < _NSIG; ++signo) {
        if (loop->signal_watchers[signo] == 0) continue;
        int r = claim_signal(loop, signo);
        if (r < 0) {
            signal_release(loop, taken);
            return r;
        }
        if (r > 0) sigaddset(taken, signo);
    }
    return 0;
}

void signal_release(tl_loop *loop, const sigset_t *taken) noexcept {
    for (int signo = 1; signo < _NSIG; ++signo)
        if (sigismember(taken, signo) == 1) release_signal(loop, signo);
}

int signal_fork(tl_loop *loop) noexcept {
    if (loop->signal_fd < 0) return 0;
    /* epoll and io_uring polls on a signalfd are tied to the process that
       created it, and the child reads only its own signals anyway: a new
       signalfd over the same mask, with the watcher moved onto it. */
    int fd = signalfd(-1, &loop->signal_mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) return -errno;
    int r = io_replace_fd(loop, &loop->signal_watcher, fd);
    if (r < 0) {
        close(fd);
        return r;
    }
    fd = r; /* it may have moved (io_replace_fd) */
    close(loop->signal_fd);
    loop->signal_fd = fd;
    return 0;
}

} // namespace tl::detail

extern "C" {

TL_API void tl_signal_init(tl_signal *s) {
    if (!s) return;
    *s = tl_signal{};
    s->magic = kSignalMarker | HANDLE_INIT;
}

TL_API int tl_signal_set_ref(tl_loop *loop, tl_signal *s, int ref) {
    if (!loop || !s) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    bool active = is_active(loop, s);
    if (active && s->loop != loop) return -EINVAL;
    uint32_t state = is_marked(s->magic) ? s->magic & HANDLE_STATE_MASK : HANDLE_INIT;
    if (!active) state &= ~HANDLE_ACTIVE;
    uint32_t next = ref ? state & ~HANDLE_UNREF : state | HANDLE_UNREF;
    s->magic = kSignalMarker | next;
    if (active) handle_ref_changed(loop, state & HANDLE_UNREF, next & HANDLE_UNREF);
    return 0;
}

TL_API int tl_signal_start(tl_loop *loop, tl_signal *s, int signo, tl_signal_cb cb, void *data) {
    if (!loop || !s || !cb || !valid_signo(signo)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (is_active(loop, s)) return -EBUSY;
    uint32_t keep = is_marked(s->magic) ? s->magic & (HANDLE_INIT | HANDLE_UNREF) : 0;

    if (loop->signal_watchers[signo] == 0) {
        int claimed = claim_signal(loop, signo);
        if (claimed < 0) return claimed;
        sigset_t mask = loop->signal_mask;
        sigaddset(&mask, signo);
        int fd = signalfd(loop->signal_fd, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (fd < 0) {
            int err = -errno;
            release_signal(loop, signo);
            return err;
        }
        if (loop->signal_fd < 0) {
            int r = io_start_internal(loop, &loop->signal_watcher, fd, on_signalfd);
            if (r < 0) {
                close(fd);
                release_signal(loop, signo);
                return r;
            }
            loop->signal_fd = fd;
        }
        thread_watch(signo);
        loop->signal_mask = mask;
    }
    ++loop->signal_watchers[signo];

    s->signo = signo;
    s->cb = cb;
    s->data = data;
    s->loop = loop;
    list_push(loop->signals, s);
    s->magic = kSignalMarker | keep | HANDLE_ACTIVE;
    ++loop->stats.signals_active;
    handle_activated(loop, keep & HANDLE_UNREF);
    return 0;
}

TL_API int tl_signal_stop(tl_loop *loop, tl_signal *s) {
    if (!loop || !s) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (!is_marked(s->magic) || !(s->magic & HANDLE_ACTIVE)) return 0;
    if (s->loop != loop) return -EINVAL;
    if (!is_active(loop, s)) return 0; /* stale marker in reused memory */
    list_unlink(loop->signals, loop->signal_cursor, s);
    uint32_t state = s->magic & (HANDLE_INIT | HANDLE_UNREF);
    s->magic = kSignalMarker | state;
    s->loop = nullptr;
    --loop->stats.signals_active;
    handle_deactivated(loop, state & HANDLE_UNREF);

    int signo = s->signo;
    if (--loop->signal_watchers[signo] == 0) {
        sigdelset(&loop->signal_mask, signo);
        /* A loop that does not hold signo is one inherited across fork()
           and not taken back: its signalfd is still the parent's. */
        if (release_signal(loop, signo))
            signalfd(loop->signal_fd, &loop->signal_mask, SFD_NONBLOCK | SFD_CLOEXEC);
        thread_unwatch(signo);
    }
    return 0;
}

} // extern "C"
