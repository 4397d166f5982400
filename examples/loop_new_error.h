/* SPDX-License-Identifier: MIT */
/*
 * loop_new_error.h: how the C examples report a failed tl_loop_new.
 *
 * The errno convention stays (tl_loop_new returns -ENOENT for a timer backend
 * name it does not know), but "No such file or directory" would send a user
 * looking for a file. So the examples say what was wrong and list what would
 * have worked, from the registry itself:
 *
 *   hello: unknown timer backend 'bogus'; registered: heap2, heap4, wheel, hwheel
 */
#ifndef TICKLOOP_EXAMPLES_LOOP_NEW_ERROR_H
#define TICKLOOP_EXAMPLES_LOOP_NEW_ERROR_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

/* err from tl_loop_new(&loop, opts); timers is opts->timers (NULL: the
 * TICKLOOP_TIMERS environment variable named it). */
static inline void report_loop_new_error(const char *prog, int err, const char *timers) {
    if (err != -ENOENT) {
        fprintf(stderr, "%s: tl_loop_new: %s\n", prog, tl_strerror(err));
        return;
    }
    if (!timers) timers = getenv("TICKLOOP_TIMERS");
    const char *names[32];
    size_t n = tl_timer_backend_names(names, 32);
    fprintf(stderr, "%s: unknown timer backend '%s'; registered: ", prog, timers ? timers : "");
    for (size_t i = 0; i < n && i < 32; i++) fprintf(stderr, "%s%s", i ? ", " : "", names[i]);
    fputc('\n', stderr);
}

#endif /* TICKLOOP_EXAMPLES_LOOP_NEW_ERROR_H */
