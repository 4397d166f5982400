/* SPDX-License-Identifier: MIT */
/*
 * example_options.h: the command-line options the C examples share.
 *
 * Each example takes --io epoll|io_uring|auto and --timers NAME (besides its
 * own), and refuses anything else with one line that says what was wrong
 * before its usage text:
 *
 *   hello: unknown option: --bogus
 *   hello: --io needs a value
 *   hello: bad value for --io: kqueue
 */
#ifndef TICKLOOP_EXAMPLES_EXAMPLE_OPTIONS_H
#define TICKLOOP_EXAMPLES_EXAMPLE_OPTIONS_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <tickloop/tickloop.h>

/* The I/O backend an --io value names, into *io: 0, or -1 (and *io left
 * alone) for a value that names none. */
static inline int parse_io_kind(const char *val, tl_io_kind *io) {
    if (strcmp(val, "epoll") == 0)
        *io = TL_IO_EPOLL;
    else if (strcmp(val, "io_uring") == 0)
        *io = TL_IO_URING;
    else if (strcmp(val, "auto") == 0)
        *io = TL_IO_AUTO;
    else
        return -1;
    return 0;
}

/* Says on stderr why opt was refused: not one of the nknown options in
 * known, no value (val NULL: opt was the last argument), or a bad value. */
static inline void report_bad_option(const char *prog, const char *opt, const char *val,
                                     const char *const *known, size_t nknown) {
    int is_known = 0;
    for (size_t k = 0; k < nknown; k++)
        if (strcmp(opt, known[k]) == 0) is_known = 1;
    if (!is_known)
        fprintf(stderr, "%s: unknown option: %s\n", prog, opt);
    else if (!val)
        fprintf(stderr, "%s: %s needs a value\n", prog, opt);
    else
        fprintf(stderr, "%s: bad value for %s: %s\n", prog, opt, val);
}

#endif /* TICKLOOP_EXAMPLES_EXAMPLE_OPTIONS_H */
