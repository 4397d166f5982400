/* SPDX-License-Identifier: MIT */
/*
 * kernel_floor.cc: tickloop-bench's kernel rows: the same waits a loop makes
 * (clock_nanosleep(TIMER_ABSTIME), epoll_pwait2 and a timerfd), with no event
 * loop around them: the floor the loops' lateness is compared with.
 */
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "job.h"

namespace bench::job {

namespace {

struct KernelWaiter {
    KernelWait how;
    int fd = -1;
    std::string error;

    explicit KernelWaiter(KernelWait h) : how(h) {
        if (how == KernelWait::epoll && (fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
            error = std::string("epoll_create1: ") + std::strerror(errno);
        if (how == KernelWait::timerfd && (fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC)) < 0)
            error = std::string("timerfd_create: ") + std::strerror(errno);
    }
    ~KernelWaiter() {
        if (fd >= 0) close(fd);
    }
    KernelWaiter(const KernelWaiter &) = delete;
    KernelWaiter &operator=(const KernelWaiter &) = delete;

    static const char *name(KernelWait how) {
        return how == KernelWait::nanosleep ? "kernel clock_nanosleep"
               : how == KernelWait::epoll   ? "kernel epoll_pwait2"
                                            : "kernel timerfd";
    }

    /* Blocks until deadline; counts each wait. Returns "" or why it failed. */
    std::string wait_until(uint64_t deadline, uint64_t *waits) {
        timespec abs{(time_t)(deadline / kSec), (long)(deadline % kSec)};
        switch (how) {
        case KernelWait::nanosleep:
            ++*waits;
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, nullptr) == EINTR) {
            }
            return "";
        case KernelWait::timerfd: {
            itimerspec its{};
            its.it_value = abs;
            if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, nullptr) != 0)
                return std::string("timerfd_settime: ") + std::strerror(errno);
            uint64_t expirations;
            ++*waits;
            while (read(fd, &expirations, sizeof expirations) < 0)
                if (errno != EINTR) return std::string("read(timerfd): ") + std::strerror(errno);
            return "";
        }
        case KernelWait::epoll:
            /* epoll_pwait2 takes a relative timeout, computed from a fresh
               clock read just before the call, as a loop does. */
            for (;;) {
                uint64_t now = mono_ns();
                if (now >= deadline) return "";
                uint64_t left = deadline - now;
                timespec rel{(time_t)(left / kSec), (long)(left % kSec)};
                epoll_event ev;
                ++*waits;
                if (epoll_pwait2(fd, &ev, 1, &rel, nullptr) < 0 && errno != EINTR)
                    return std::string("epoll_pwait2: ") + std::strerror(errno);
            }
        }
        return "";
    }
};

} // namespace

/* One kernel row: chain (also the sweep's rows) or open, with the same
   waits a loop would make but no loop around them. */
Result kernel_latency(KernelWait how, const char *workload, const std::vector<uint64_t> &delays) {
    Result r;
    r.impl = KernelWaiter::name(how);
    r.family = "kernel";
    r.workload = workload;
    KernelWaiter waiter(how);
    if (!waiter.error.empty()) {
        r.skipped = waiter.error;
        return r;
    }
    r.lateness.reserve(delays.size());
    uint64_t w0 = mono_ns();
    if (std::strcmp(workload, "chain") == 0) {
        /* "now" plays the loop's cached time: the clock read at wake-up. */
        uint64_t now = mono_ns();
        for (uint64_t delay : delays) {
            uint64_t deadline = now + delay;
            r.skipped = waiter.wait_until(deadline, &r.waits);
            if (!r.skipped.empty()) break;
            now = mono_ns();
            r.lateness.push_back((int64_t)(now - deadline));
            ++r.fired;
        }
    } else {
        uint64_t t0 = mono_ns();
        std::vector<uint64_t> deadlines(delays.size());
        for (size_t i = 0; i < delays.size(); ++i) deadlines[i] = t0 + delays[i];
        /* Sorting is the ideal timer structure's work, done for free up front. */
        std::sort(deadlines.begin(), deadlines.end());
        size_t next = 0;
        while (next < deadlines.size()) {
            r.skipped = waiter.wait_until(deadlines[next], &r.waits);
            if (!r.skipped.empty()) break;
            uint64_t now = mono_ns();
            while (next < deadlines.size() && deadlines[next] <= now) {
                r.lateness.push_back((int64_t)(mono_ns() - deadlines[next++]));
                ++r.fired;
            }
        }
    }
    r.wall_s = (double)(mono_ns() - w0) / 1e9;
    return r;
}

} // namespace bench::job
