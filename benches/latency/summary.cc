/* SPDX-License-Identifier: MIT */
/*
 * summary.cc: tickloop-bench's one-screen summary (printed last, and the
 * second half of summary.txt), and how figures are printed.
 */
#include <algorithm>
#include <cstring>

#include "job.h"

namespace bench::job {

std::string us(int64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", (double)ns / 1e3);
    return buf;
}

std::string ratio(double ours, double best) {
    if (best <= 0) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", ours / best);
    return buf;
}

/* The one-screen summary: every tickloop configuration (backend/io) across
   every workload that ran, each cell "our figure (ours / best peer's)". The
   latency cells are p50 and p99 in us (timer slack as printed at the top;
   the slack-1 rows stay in their own table); the operation cells are ns/op
   of the backend, whatever the I/O kind. A cell whose figure rests on fewer
   samples (or rounds) than the minimums of latency.h shows the figure and
   its count, and no ratio; best peers are chosen among rows above them. */
struct SummaryColumn {
    std::string workload, label;
    bool latency;
    double q; /* latency: the percentile */
};

/* Samples behind one cell: lateness samples, or timed rounds. */
static size_t cell_samples(const SummaryColumn &c, const Result &r) {
    return c.latency ? r.lateness.size() : r.round_ns_per_op.size();
}
static size_t cell_minimum(const SummaryColumn &c) {
    return !c.latency ? kMinRounds : c.q < 0.9 ? kMinSamples : kMinTailSamples;
}
static double cell_figure(const SummaryColumn &c, const Result &r) {
    if (!c.latency) return median_ns_per_op(r);
    Stats s = stats_of(r.lateness);
    return (double)(c.q < 0.9 ? s.p50 : s.p99) / 1e3;
}

/* The summary's columns, the population each operation column compares
   at, and each column's best peer. */
struct SummaryTable {
    std::vector<SummaryColumn> columns;
    size_t n_latency = 0; /* the first n_latency columns are latency */
    std::vector<uint64_t> population;
    std::vector<double> best;
    std::vector<std::string> best_name;
};

static SummaryTable summary_columns(const std::vector<Result> &all) {
    SummaryTable t;
    std::vector<SummaryColumn> &columns = t.columns;
    for (const char *w : {"chain", "open"})
        for (double q : {0.50, 0.99})
            columns.push_back({w, std::string(w) + (q < 0.9 ? " p50" : " p99"), true, q});
    for (const char *w : {"sweep-1ms", "sweep-100ms"})
        columns.push_back({w, std::string(w + 6) + " p50", true, 0.5});
    t.n_latency = columns.size();
    for (const char *w : {"restart", "restart-batch", "expire", "expire-shuffled", "expire-equal"})
        columns.push_back({w, std::string(w) + " ns", false, 0});
    /* Populations: the first of each operation workload (1e5 by default). */
    t.population.resize(columns.size());
    t.best.resize(columns.size());
    t.best_name.resize(columns.size());
    for (size_t c = 0; c < columns.size(); ++c)
        for (const Result &r : all) {
            if (r.workload != columns[c].workload || !r.skipped.empty()) continue;
            if (!columns[c].latency && t.population[c] == 0) t.population[c] = r.population;
            if (!columns[c].latency && r.population != t.population[c]) continue;
            if (r.family != "peer" || cell_samples(columns[c], r) < cell_minimum(columns[c]))
                continue;
            double v = cell_figure(columns[c], r);
            if (t.best_name[c].empty() || v < t.best[c]) t.best[c] = v, t.best_name[c] = r.impl;
        }
    return t;
}

/* One cell: our figure, and its ratio to the best peer's. */
static std::string summary_cell(const SummaryTable &t, size_t c, const std::vector<Result> &all,
                                const std::string &impl) {
    const SummaryColumn &col = t.columns[c];
    auto it = std::find_if(all.begin(), all.end(), [&](const Result &r) {
        return r.impl == impl && r.workload == col.workload && r.skipped.empty() &&
               (col.latency || r.population == t.population[c]);
    });
    char cell[40] = "-";
    if (it != all.end() && cell_samples(col, *it)) {
        double v = cell_figure(col, *it);
        size_t n = cell_samples(col, *it);
        if (n < cell_minimum(col))
            std::snprintf(cell, sizeof cell, "%.1f (n=%zu)", v, n);
        else if (t.best[c] > 0)
            std::snprintf(cell, sizeof cell, "%.1f (%.2fx)", v, v / t.best[c]);
        else
            std::snprintf(cell, sizeof cell, "%.1f", v);
    }
    return cell;
}

/* The rows impls over columns [c0, c1). */
static void summary_table(FILE *f, const SummaryTable &t, const std::vector<Result> &all,
                          const std::vector<std::string> &impls, size_t c0, size_t c1,
                          const char *what) {
    if (impls.empty() || c0 == c1) return;
    std::fprintf(f,
                 "\n== summary, %s: each cell our figure (ours / best peer's, below 1 is "
                 "better) ==\n%-26s",
                 what, "");
    for (size_t c = c0; c < c1; ++c) std::fprintf(f, " %17s", t.columns[c].label.c_str());
    std::fprintf(f, "\n");
    for (const std::string &impl : impls) {
        std::fprintf(f, "%-26s", impl.substr(std::strlen("tickloop ")).c_str());
        for (size_t c = c0; c < c1; ++c)
            std::fprintf(f, " %17s", summary_cell(t, c, all, impl).c_str());
        std::fprintf(f, "\n");
    }
    std::fprintf(f, "%-26s", "best peer");
    for (size_t c = c0; c < c1; ++c) {
        char cell[40] = "-";
        if (!t.best_name[c].empty()) std::snprintf(cell, sizeof cell, "%.1f", t.best[c]);
        std::fprintf(f, " %17s", cell);
    }
    std::fprintf(f, "\n");
    for (size_t c = c0; c < c1; ++c)
        if (!t.best_name[c].empty())
            std::fprintf(
                f, "best peer, %s: %s%s\n", t.columns[c].label.c_str(), t.best_name[c].c_str(),
                t.population[c] ? (" (" + std::to_string(t.population[c]) + " live)").c_str() : "");
}

void print_summary(FILE *f, const std::vector<Result> &all) {
    SummaryTable t = summary_columns(all);
    /* Latency per backend/I/O pair; operation costs per backend (measured
       once, on one I/O kind: the operations never poll). */
    std::vector<std::string> configs, backends;
    for (const Result &r : all) {
        if (r.family != "tickloop" || r.impl.find(" slack ") != std::string::npos) continue;
        bool latency =
            r.workload == "chain" || r.workload == "open" || r.workload.rfind("sweep-", 0) == 0;
        auto &list = latency ? configs : backends;
        if (std::find(list.begin(), list.end(), r.impl) == list.end()) list.push_back(r.impl);
    }
    summary_table(f, t, all, configs, 0, t.n_latency, "lateness in us (backend/io)");
    summary_table(f, t, all, backends, t.n_latency, t.columns.size(),
                  "ns per operation (backend; any I/O kind)");
    std::fprintf(f,
                 "ratios only where both sides have enough samples: %zu lateness samples for a "
                 "p50, %zu for a p99, %zu timed rounds for ns/op; (n=...) marks a figure with "
                 "fewer, shown but not compared\n",
                 kMinSamples, kMinTailSamples, kMinRounds);
    std::fflush(f);
}

} // namespace bench::job
