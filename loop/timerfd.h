/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: arming an absolute timerfd without a syscall per
 * iteration. epoll.cc's wait deadline and clock.cc's per-clock wake-ups both
 * keep one timerfd and the expiry it holds, and re-arm it only when a
 * deadline earlier than that expiry is asked for, or when it holds none (it
 * fired, or was never armed: the owner then resets its record to 0). A
 * deadline that moved later leaves the earlier expiry armed: the loop wakes
 * once early, finds nothing due, and the next wait arms the new deadline.
 */
#ifndef TICKLOOP_LOOP_TIMERFD_H
#define TICKLOOP_LOOP_TIMERFD_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <sys/timerfd.h>

namespace tl::detail {

/* Makes timerfd fd fire no later than deadline_ns, an absolute time on the
 * fd's clock (TFD_TIMER_ABSTIME, plus extra_flags: TFD_TIMER_CANCEL_ON_SET or
 * 0). *armed is the expiry fd holds, 0 for none: when it is no later than
 * deadline_ns nothing is done. Returns 0 (*armed updated), or the negative
 * errno of timerfd_settime with *armed unchanged. */
inline int timerfd_arm(int fd, uint64_t *armed, uint64_t deadline_ns, int extra_flags) noexcept {
    if (*armed != 0 && *armed <= deadline_ns) return 0;
    /* 0 would disarm the timerfd (and reads as "none" in *armed): a
       deadline at time 0 is long past anyway. */
    if (deadline_ns == 0) deadline_ns = 1;
    struct itimerspec its;
    std::memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)(deadline_ns / 1000000000u);
    its.it_value.tv_nsec = (long)(deadline_ns % 1000000000u);
    if (timerfd_settime(fd, TFD_TIMER_ABSTIME | extra_flags, &its, nullptr) < 0) return -errno;
    *armed = deadline_ns;
    return 0;
}

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_TIMERFD_H */
