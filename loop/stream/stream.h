/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: what the stream core (stream.cc; tl_stream, and
 * tl_listener through listener.cc) offers the rest of the loop: events and completions for their
 * registrations, the stream callbacks due after the I/O callbacks, configuration and teardown.
 */
#ifndef TICKLOOP_LOOP_STREAM_H
#define TICKLOOP_LOOP_STREAM_H

#include <cstdint>

#include "loop/state.h"
#include "tickloop/tickloop.h"

namespace tl::detail {

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
/* Sets the loop's stream path from what its new I/O backend io offers (a
   completion path, IoBackend::completion(), or readiness), and points the
   fd registry's handle_io at the path's table: once per backend created. */
void streams_choose_path(tl_loop *loop, IoBackend *io) noexcept;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_STREAM_H */
