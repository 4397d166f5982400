/* SPDX-License-Identifier: MIT */
/*
 * scenarios.h: what bench-scenarios' parent (scenarios.cc) and its child
 * processes (child.cc) share: the workloads' sizes, and the child's entry.
 */
#ifndef TICKLOOP_BENCHES_SCENARIOS_H
#define TICKLOOP_BENCHES_SCENARIOS_H

#include <cstddef>
#include <string>

namespace bench::scenarios {

struct Sizes {
    size_t million_n = 10000000;
    size_t million_per_ms = 1000; /* libuv's benchmark: 1000 timers per ms of timeout */
    size_t heartbeat_conns = 1000000;
    size_t heartbeat_packets = 1u << 23;
    size_t delayed_tasks = 1000000;
};

/* Runs scenario on lib ("libev", "libuv" or a tickloop timer backend) in
   this process, printing its result lines; returns the exit status. */
int child(const std::string &scenario, const std::string &lib, const Sizes &z);

} // namespace bench::scenarios

#endif /* TICKLOOP_BENCHES_SCENARIOS_H */
