/* SPDX-License-Identifier: MIT */
/*
 * verdicts.cc: tickloop-bench's verdicts: one short answer per question the
 * job asks (which backend fires least late, which restarts cheapest, how far
 * from the kernel's floor), printed after the summary and first in
 * summary.txt.
 */
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "job.h"

namespace bench::job {

namespace {

/* Appends printf-formatted text to out. */
template <class... Args>
void add(std::string &out, const char *fmt, Args... args) {
    char line[512];
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
}

/* The configuration without "tickloop " and the default-setting tags. */
std::string short_name(const std::string &impl) {
    return impl.rfind("tickloop ", 0) == 0 ? impl.substr(std::strlen("tickloop ")) : impl;
}

/* tickloop rows at the default settings (no second slack, not the relative
   fallback) of one latency workload, with at least `min_n` samples. */
std::vector<const Result *> default_rows(const std::vector<Result> &all, const char *workload,
                                         size_t min_n) {
    std::vector<const Result *> out;
    for (const Result &r : all)
        if (r.family == "tickloop" && r.workload == workload && r.skipped.empty() &&
            r.impl.find(" slack ") == std::string::npos &&
            r.impl.find(" relative") == std::string::npos && r.lateness.size() >= min_n)
            out.push_back(&r);
    return out;
}

const Result *find_row(const std::vector<Result> &all, const std::string &impl,
                       const std::string &workload) {
    for (const Result &r : all)
        if (r.impl == impl && r.workload == workload && r.skipped.empty()) return &r;
    return nullptr;
}

void least_late(std::string &out, const std::vector<Result> &all,
                const std::vector<const Result *> &chain) {
    /* 1. Which backend fires least late: the chain (one timer at a time, the
       common case of a timeout), ranked by p50; the p99s beside it, with the
       kernel floor's own p99, show how much of the tail is the machine's. */
    out += "Which backend fires least late? ";
    if (chain.empty()) {
        add(out,
            "not answered: no chain row with %zu samples (run without --only, or with chain)\n",
            kMinTailSamples);
    } else {
        std::vector<std::pair<Stats, const Result *>> ranked;
        for (const Result *r : chain) ranked.push_back({stats_of(r->lateness), r});
        std::sort(ranked.begin(), ranked.end(),
                  [](auto &a, auto &b) { return a.first.p50 < b.first.p50; });
        const Stats &b = ranked.front().first;
        add(out, "%s, chain p50 %s us (%zu timers).",
            short_name(ranked.front().second->impl).c_str(), us(b.p50).c_str(), b.n);
        int64_t lo99 = b.p99, hi99 = b.p99;
        for (auto &[st, r] : ranked) lo99 = std::min(lo99, st.p99), hi99 = std::max(hi99, st.p99);
        if (ranked.size() > 1)
            add(out, " All %zu tickloop configurations: p50 %s - %s us, p99 %s - %s us.",
                ranked.size(), us(b.p50).c_str(), us(ranked.back().first.p50).c_str(),
                us(lo99).c_str(), us(hi99).c_str());
        if (const Result *fl = find_row(all, "kernel timerfd", "chain"))
            add(out, " The kernel timerfd alone: p50 %s us, p99 %s us.",
                us(stats_of(fl->lateness).p50).c_str(), us(stats_of(fl->lateness).p99).c_str());
        const Result *peer = nullptr;
        for (const Result &r : all)
            if (r.family == "peer" && r.workload == "chain" && r.skipped.empty() &&
                r.lateness.size() >= kMinSamples &&
                (!peer || stats_of(r.lateness).p50 < stats_of(peer->lateness).p50))
                peer = &r;
        if (peer) {
            Stats p = stats_of(peer->lateness);
            add(out, " Best peer %s: p50 %s us (ours %.2fx).", peer->impl.c_str(),
                us(p.p50).c_str(), p.p50 ? (double)b.p50 / (double)p.p50 : 0.0);
        }
        size_t early = 0;
        for (const Result &r : all)
            if (r.family == "tickloop") early += stats_of(r.lateness).early;
        add(out, " Early fires, every tickloop row: %zu.\n", early);
    }
}

void cheapest_restart(std::string &out, const std::vector<Result> &all) {
    /* 2. Which restarts cheapest: random restarts among the first
       population's live timers, and the batched (server) pattern. */
    for (const char *workload : {"restart", "restart-batch"}) {
        out += std::strcmp(workload, "restart") == 0
                   ? "Which restarts cheapest (random deadlines)? "
                   : "Which restarts cheapest (batches of equal deadlines)? ";
        std::vector<const Result *> rows;
        uint64_t population = 0;
        for (const Result &r : all) {
            if (r.workload != workload || !r.skipped.empty() || r.round_ns_per_op.empty()) continue;
            if (!population) population = r.population;
            if (r.population == population && r.round_ns_per_op.size() >= kMinRounds)
                rows.push_back(&r);
        }
        if (rows.empty()) {
            if (population)
                add(out, "not answered: no row with %zu timed rounds\n", kMinRounds);
            else
                out += "not run (see --only)\n";
            continue;
        }
        std::sort(rows.begin(), rows.end(), [](const Result *a, const Result *b) {
            return median_ns_per_op(*a) < median_ns_per_op(*b);
        });
        add(out, "%s, %.1f ns per restart (%" PRIu64 " live, median of %zu rounds); then",
            short_name(rows[0]->impl).c_str(), median_ns_per_op(*rows[0]), population,
            rows[0]->round_ns_per_op.size());
        for (size_t i = 1; i < rows.size() && i < 4; ++i)
            add(out, "%s %s %.1f", i > 1 ? "," : "", short_name(rows[i]->impl).c_str(),
                median_ns_per_op(*rows[i]));
        out += ".\n";
    }
}

void kernel_distance(std::string &out, const std::vector<Result> &all,
                     const std::vector<const Result *> &chain) {
    /* 3. How far from the kernel's floor: each default tickloop chain row
       against the kernel mechanism it waits with, doing the same waits. */
    out += "How far from the kernel's floor? ";
    if (chain.empty()) {
        out += "not answered: no chain rows\n";
    } else {
        const Result *floor = find_row(all, "kernel timerfd", "chain");
        if (!floor || floor->lateness.size() < kMinTailSamples) {
            out += "not answered: no kernel timerfd row with enough samples\n";
        } else {
            Stats fl = stats_of(floor->lateness);
            add(out,
                "kernel timerfd, same chain: p50 %s us, p99 %s us. tickloop minus it, p50 / p99 "
                "in us:",
                us(fl.p50).c_str(), us(fl.p99).c_str());
            int64_t worst50 = INT64_MIN, worst99 = INT64_MIN;
            for (size_t i = 0; i < chain.size(); ++i) {
                Stats s = stats_of(chain[i]->lateness);
                add(out, "%s %s %+.1f / %+.1f", i ? "," : "", short_name(chain[i]->impl).c_str(),
                    (double)(s.p50 - fl.p50) / 1e3, (double)(s.p99 - fl.p99) / 1e3);
                worst50 = std::max(worst50, s.p50 - fl.p50);
                worst99 = std::max(worst99, s.p99 - fl.p99);
            }
            add(out,
                ". Largest: %+.1f us at p50, %+.1f us at p99 (below 0: the loop's row was less "
                "late than the kernel's alone, which is this machine's noise).\n",
                (double)worst50 / 1e3, (double)worst99 / 1e3);
        }
    }
}

} // namespace

std::string verdicts(const std::vector<Result> &all) {
    std::string out;
    std::vector<const Result *> chain = default_rows(all, "chain", kMinTailSamples);
    least_late(out, all, chain);
    cheapest_restart(out, all);
    kernel_distance(out, all, chain);
    return out;
}

} // namespace bench::job
