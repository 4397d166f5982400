/* SPDX-License-Identifier: MIT */
/*
 * bench-expire-ir: the expiry of one timer backend, driven through its vtable
 * with nows and deadlines that do not depend on the clock, so that callgrind
 * counts the same instructions run after run (bench-timer-ops's expire rows
 * use a real loop and real time: which level a wheel files a timer at, and
 * so what it costs to pop, depends on when the row ran).
 *
 *   valgrind --tool=callgrind --collect-atstart=no \
 *       bench-expire-ir BACKEND N ROUNDS
 *
 * Each round inserts N timers with deadlines drawn over 20 ms, then pops
 * them all at one now 31 ms later; only the pops are counted (callgrind's
 * collect toggle), so the total over N * ROUNDS is instructions per pop.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <tickloop/timer_backend.h>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TL_BENCH_COLLECT() CALLGRIND_TOGGLE_COLLECT
#else
#define TL_BENCH_COLLECT() ((void)0)
#endif

int main(int argc, char **argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: bench-expire-ir BACKEND N ROUNDS\n");
        return 2;
    }
    const tl_timer_backend *b = tl_timer_backend_find(argv[1]);
    size_t n = std::strtoull(argv[2], nullptr, 10);
    int rounds = std::atoi(argv[3]);
    if (!b || n == 0 || rounds <= 0) return 2;
    tl_timer_config cfg{1000000, 4096}; /* the loop's defaults */
    std::vector<tl_timer> timers(n);
    uint64_t state = 0x1234567, now = 1000000000000ull + 123456;
    void *self = b->create(&cfg, now);
    if (!self) return 1;
    size_t popped = 0;
    for (int r = 0; r < rounds; ++r) {
        for (tl_timer &t : timers) {
            std::memset(&t, 0, sizeof t);
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            t.deadline = now + (state >> 33) % 20000000;
            if (b->insert(self, &t) != 0) return 1;
        }
        now += 31000000;
        TL_BENCH_COLLECT();
        while (b->pop_expired(self, now)) ++popped;
        TL_BENCH_COLLECT();
    }
    b->destroy(self);
    std::printf("popped %zu of %zu\n", popped, n * size_t(rounds));
    return popped == n * size_t(rounds) ? 0 : 1;
}
