/* SPDX-License-Identifier: MIT */
/*
 * wait_counter.cc: counts the epoll waits the peer libraries make, by
 * defining epoll_wait, epoll_pwait and epoll_pwait2 in the benchmark
 * executable and forwarding to libc's through dlsym(RTLD_NEXT).
 *
 * Why this works: a shared library (libev.so, libuv.so, libevent.so) that
 * calls epoll_wait binds to the first definition in the global lookup scope,
 * and the executable comes first; the linker exports the executable's
 * definition because those libraries reference the symbol. The counter costs
 * one increment per wait, nothing against a syscall.
 */
#include "wait_counter.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

namespace {
/* Per thread: the wait sweep runs its rows side by side in threads. */
thread_local uint64_t waits;

template <class Fn>
Fn real(const char *name) {
    return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}
} // namespace

namespace bench {
uint64_t kernel_waits() {
    return waits;
}
bool kernel_waits_interposed() {
    return waits != 0;
}
} // namespace bench

extern "C" {

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout) {
    using Fn = int (*)(int, struct epoll_event *, int, int);
    static Fn next = real<Fn>("epoll_wait");
    ++waits;
    return next(epfd, events, maxevents, timeout);
}

int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
                const sigset_t *sigmask) {
    using Fn = int (*)(int, struct epoll_event *, int, int, const sigset_t *);
    static Fn next = real<Fn>("epoll_pwait");
    ++waits;
    return next(epfd, events, maxevents, timeout, sigmask);
}

int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
                 const struct timespec *timeout, const sigset_t *sigmask) {
    using Fn = int (*)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
    static Fn next = real<Fn>("epoll_pwait2");
    ++waits;
    return next(epfd, events, maxevents, timeout, sigmask);
}

} // extern "C"
