/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: what the stream core (stream.cc; tl_stream, and
 * tl_listener through listener.cc) offers the rest of the loop: events and completions for their
 * registrations, the stream callbacks due after the I/O callbacks, configuration and teardown.
 */
#ifndef TICKLOOP_LOOP_STREAM_H
#define TICKLOOP_LOOP_STREAM_H

#include <cstdint>

#include "loop/io/backend.h"
#include "loop/io_event.h"
#include "loop/state.h"
#include "tickloop/tickloop.h"

namespace tl::detail {

/* An event (readiness, or a completion on io_uring) for a
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
/* Sets the loop's stream path from what its new I/O backend offers
   (streams_completion): once per backend created. */
void streams_choose_path(tl_loop *loop) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_STREAM_H */
