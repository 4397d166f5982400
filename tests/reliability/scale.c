/* SPDX-License-Identifier: MIT */
/*
 * Scale: N live timers in one loop, for every registered
 * timer backend. A measurement, not a test (meson builds it on request:
 * `ninja -C build tests/reliability/scale`).
 *
 * For each backend and each N (default 1e6 and 1e7):
 * - bytes per timer: the process's RSS growth from before the loop and the
 *   timers exist to when all N are started, divided by N. It includes the
 *   tl_timer itself (sizeof printed beside it) and whatever the backend
 *   allocates (a heap's pointer array; the wheels keep their node inside
 *   tl_timer.link and allocate only their slot arrays);
 * - start-all: tl_timer_start of N timers with timeouts spread over 100 ms in
 *   a jumbled order, in ns per timer;
 * - fire-all: once all are due, tl_loop_run(DEFAULT) until every callback has
 *   run, in ns per timer.
 * The ns-per-timer columns at 1e6 and 1e7 side by side show whether anything
 * grows faster than n log n (the last column: 1e7 time per timer over 1e6).
 *
 *   scale [N ...]          e.g. scale 1000000 10000000
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Resident set size in bytes, from /proc/self/statm. */
static uint64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (!f) return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static size_t fired;
static void on_fire(tl_loop *loop, tl_timer *t) {
    (void)loop;
    (void)t;
    fired++;
}

struct result {
    double bytes_per_timer, start_ns, fire_ns;
};

static int measure(const char *backend, size_t n, struct result *out) {
    /* The timers in their own mapping, so that unmapping returns the memory
       and every measurement starts from the same RSS. */
    size_t bytes = n * sizeof(tl_timer);
    uint64_t rss0 = rss_bytes();
    tl_timer *timers =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (timers == MAP_FAILED) return -1;
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = backend;
    tl_loop *loop;
    if (tl_loop_new(&loop, &opts) != 0) return -1;
    for (size_t i = 0; i < n; i++) tl_timer_init(&timers[i], on_fire, NULL);

    uint64_t t0 = mono_ns();
    for (size_t i = 0; i < n; i++) {
        /* 0..100 ms in 1 us steps, jumbled (7919 is prime to 100,000). */
        uint64_t timeout = (uint64_t)(i * 7919 % 100000) * 1000;
        if (tl_timer_start(loop, &timers[i], timeout, 0) != 0) return -1;
    }
    uint64_t t1 = mono_ns();
    uint64_t rss1 = rss_bytes();

    /* Let every timer come due, then time the dispatch of all of them. */
    while (mono_ns() < t0 + 110 * 1000000ull) usleep(1000);
    fired = 0;
    uint64_t t2 = mono_ns();
    if (tl_loop_run(loop, TL_RUN_DEFAULT) != 0 || fired != n) return -1;
    uint64_t t3 = mono_ns();

    tl_loop_free(loop);
    munmap(timers, bytes);
    out->bytes_per_timer = (double)(rss1 - rss0) / (double)n;
    out->start_ns = (double)(t1 - t0) / (double)n;
    out->fire_ns = (double)(t3 - t2) / (double)n;
    return 0;
}

int main(int argc, char **argv) {
    size_t sizes[16] = {1000000, 10000000};
    int nsizes = 2;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 16; i++) sizes[nsizes++] = strtoull(argv[i], NULL, 0);
    }
    const char *names[64];
    size_t nb = tl_timer_backend_names(names, 64);
    if (nb > 64) nb = 64;
    printf("tickloop %s, sizeof(tl_timer) = %zu bytes\n", tl_version(), sizeof(tl_timer));
    printf("%-8s %10s %14s %16s %14s %14s\n", "backend", "timers", "bytes/timer", "backend B/timer",
           "start ns/op", "fire ns/op");
    for (size_t b = 0; b < nb; b++) {
        double first_start = 0, first_fire = 0;
        for (int s = 0; s < nsizes; s++) {
            struct result r;
            if (measure(names[b], sizes[s], &r) != 0) {
                fprintf(stderr, "%s: %zu timers failed\n", names[b], sizes[s]);
                return 1;
            }
            printf("%-8s %10zu %14.1f %16.1f %14.1f %14.1f", names[b], sizes[s], r.bytes_per_timer,
                   r.bytes_per_timer - (double)sizeof(tl_timer), r.start_ns, r.fire_ns);
            if (s == 0) {
                first_start = r.start_ns;
                first_fire = r.fire_ns;
            } else {
                printf("   (x%.2f start, x%.2f fire per timer vs %zu)", r.start_ns / first_start,
                       r.fire_ns / first_fire, sizes[0]);
            }
            printf("\n");
            fflush(stdout);
        }
    }
    return 0;
}
