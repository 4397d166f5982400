/* SPDX-License-Identifier: MIT */
/*
 * wait_counter.h: how many times this process entered epoll_wait /
 * epoll_pwait / epoll_pwait2, counted by wait_counter.cc.
 *
 * The peers expose no common "kernel waits" counter (libev has ev_iteration,
 * libuv 1.44 and libevent 2.1 have nothing), so the benchmarks count the
 * syscalls themselves: one number, measured the same way for every peer.
 * tickloop's own figure comes from tl_loop_stats_get (iterations), as its
 * contract defines it.
 */
#ifndef TICKLOOP_BENCHES_WAIT_COUNTER_H
#define TICKLOOP_BENCHES_WAIT_COUNTER_H

#include <cstdint>

namespace bench {
/* Calls so far; the benchmarks are single-threaded, so a plain counter. */
uint64_t kernel_waits();
/* True once the interposed wrappers have seen a call: a row whose waits are
   counted this way and which fired timers but saw no wait means the wrappers
   were bypassed (e.g. a library calling the syscall directly). */
bool kernel_waits_interposed();
} // namespace bench

#endif /* TICKLOOP_BENCHES_WAIT_COUNTER_H */
