/* SPDX-License-Identifier: MIT */
/*
 * io_batch_flag.h: the value of the I/O servers' --io-batch flag (http/ and
 * connections/), "off", "adaptive:US" or "fixed:US" with US > 0 in
 * microseconds, parsed in one place so that every server takes the same
 * spelling. What a loop does with it is its server's business (tickloop:
 * tl_loop_options.io_batch_ns and io_batch_adaptive; libev: a collect
 * interval for fixed). C11 and C++.
 */
#ifndef TICKLOOP_BENCHES_IO_BATCH_FLAG_H
#define TICKLOOP_BENCHES_IO_BATCH_FLAG_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Parses mode into *ns (the bound, 0 for off) and *adaptive (1 for
 * adaptive:US, else 0). Returns 0, or -1 on anything else, leaving both
 * untouched; the caller says what is wrong in its own usage message. */
static inline int bench_parse_io_batch(const char *mode, uint64_t *ns, int *adaptive) {
    if (strcmp(mode, "off") == 0) {
        *ns = 0;
        *adaptive = 0;
        return 0;
    }
    int is_adaptive;
    const char *us;
    if (strncmp(mode, "adaptive:", 9) == 0) {
        is_adaptive = 1;
        us = mode + 9;
    } else if (strncmp(mode, "fixed:", 6) == 0) {
        is_adaptive = 0;
        us = mode + 6;
    } else {
        return -1;
    }
    char *end;
    double v = strtod(us, &end);
    if (end == us || *end || !(v > 0)) return -1;
    *ns = (uint64_t)(v * 1e3);
    *adaptive = is_adaptive;
    return 0;
}

#endif /* TICKLOOP_BENCHES_IO_BATCH_FLAG_H */
