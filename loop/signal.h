/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: what signal.cc (tl_signal, one signalfd per loop)
 * offers the loop's lifecycle.
 */
#ifndef TICKLOOP_LOOP_SIGNAL_H
#define TICKLOOP_LOOP_SIGNAL_H

#include "tickloop/tickloop.h"

namespace tl::detail {

/* Releases what signal.cc holds (the loop has no active handle). */
void signal_close(tl_loop *loop) noexcept;
/* tl_loop_fork's step for the loop's own descriptor: creates a new kernel
   object, moves the internal watcher onto it (io_replace_fd; the new I/O
   backend then sees it among the registrations) and closes the inherited
   one. */
int signal_fork(tl_loop *loop) noexcept;
/* tl_loop_fork's first step: a child after fork() starts owning no signal
   (signal.cc), and the inherited loop takes each signal it watches again.
   Stores in *taken those it took now (none that it held already, as in the
   process that created it). Returns 0, or -EEXIST (another loop of the
   process has one of them) with nothing taken. signal_release gives back
   *taken, when a later step fails. */
int signal_retake(tl_loop *loop, sigset_t *taken) noexcept;
void signal_release(tl_loop *loop, const sigset_t *taken) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_SIGNAL_H */
