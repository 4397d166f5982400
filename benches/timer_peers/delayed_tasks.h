/* SPDX-License-Identifier: MIT */
/*
 * The delayed-tasks workload's sizes and seed (Kafka's purgatory: 1,000,000
 * timers with delays uniform in [3.1 s, 5 s], 90% cancelled in random order,
 * 100,000 fire), shared by bench-timer-peers and bench-cascade-burst so that
 * both draw the same delays and the same cancel order from latency.h's Rng.
 * Peers.java and peers.go use the same values.
 */
#ifndef TICKLOOP_BENCHES_DELAYED_TASKS_H
#define TICKLOOP_BENCHES_DELAYED_TASKS_H

#include <cstddef>
#include <cstdint>

#include "latency.h"

namespace bench {

inline constexpr size_t kDelayedN = 1000000;
inline constexpr size_t kDelayedSurvivors = 100000;
inline constexpr uint64_t kDelayMin = 3100 * kMs, kDelaySpan = 1900 * kMs;
inline constexpr uint64_t kDelayedSeed = 0x64656c61796564ull;

} // namespace bench

#endif /* TICKLOOP_BENCHES_DELAYED_TASKS_H */
