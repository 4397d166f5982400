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
 * Two loops watching one signal compete for it (each instance goes to one of
 * them); watch a signal from one loop.
 */
#include <cerrno>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "loop_internal.h"

using namespace tl::detail;

namespace {

constexpr uint32_t kSignalMagic = 0x7a5c1e02u;

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

} // namespace tl::detail

extern "C" {

TL_API int tl_signal_start(tl_loop *loop, tl_signal *s, int signo, tl_signal_cb cb, void *data) {
    if (!loop || !s || !cb || !valid_signo(signo)) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (s->magic == kSignalMagic && (s->loop != loop || list_contains(loop->signals, s)))
        return -EBUSY;

    if (loop->signal_watchers[signo] == 0) {
        sigset_t mask = loop->signal_mask;
        sigaddset(&mask, signo);
        int fd = signalfd(loop->signal_fd, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (fd < 0) return -errno;
        if (loop->signal_fd < 0) {
            int r = io_start_internal(loop, &loop->signal_watcher, fd, on_signalfd);
            if (r < 0) {
                close(fd);
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
    s->magic = kSignalMagic;
    ++loop->active_handles;
    return 0;
}

TL_API int tl_signal_stop(tl_loop *loop, tl_signal *s) {
    if (!loop || !s) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (s->magic != kSignalMagic) return 0;
    if (s->loop != loop) return -EINVAL;
    if (!list_contains(loop->signals, s)) return 0; /* stale magic in reused memory */
    list_unlink(loop->signals, loop->signal_cursor, s);
    s->magic = 0;
    s->loop = nullptr;
    --loop->active_handles;

    int signo = s->signo;
    if (--loop->signal_watchers[signo] == 0) {
        sigdelset(&loop->signal_mask, signo);
        signalfd(loop->signal_fd, &loop->signal_mask, SFD_NONBLOCK | SFD_CLOEXEC);
        thread_unwatch(signo);
    }
    return 0;
}

} // extern "C"
