/* SPDX-License-Identifier: MIT */
/*
 * loop_new_error.h: how the C examples report a failed tl_loop_new.
 *
 * The errno alone does not say which option was wrong ("Invalid argument"
 * for TICKLOOP_IO=bogus, "No such file or directory" for an unknown timer
 * backend), so the examples print tl_loop_new_error(), the library's own
 * account of what it refused and what it would have accepted:
 *
 *   hello: tl_loop_new: tl_loop_options.timers: unknown timer backend "bogus";
 *   registered: heap2, heap4, wheel, hwheel
 */
#ifndef TICKLOOP_EXAMPLES_LOOP_NEW_ERROR_H
#define TICKLOOP_EXAMPLES_LOOP_NEW_ERROR_H

#include <stdio.h>

#include <tickloop/tickloop.h>

/* err from tl_loop_new(&loop, opts), called on this thread just before.
 * timers is opts->timers; the library's detail names it already, so it is
 * unused (kept for the examples that pass it). */
static inline void report_loop_new_error(const char *prog, int err, const char *timers) {
    (void)timers;
    const char *why = tl_loop_new_error();
    fprintf(stderr, "%s: tl_loop_new: %s\n", prog, why ? why : tl_strerror(err));
}

#endif /* TICKLOOP_EXAMPLES_LOOP_NEW_ERROR_H */
