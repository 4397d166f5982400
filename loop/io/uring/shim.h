/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/uring*.cc: every use of liburing's internals, in one
 * place. Written for liburing 2.3 (Debian 12) on its struct io_uring layout;
 * the rest of the backend calls only liburing's public functions and these
 * helpers, and never touches struct io_uring's fields.
 *
 * What 2.3 lacks, and why each helper exists:
 * - io_uring_enable_rings() is declared but not exported: enable_rings()
 *   makes the register call it would make.
 * - No call waits with an absolute timeout (IORING_ENTER_ABS_TIMER, Linux
 *   6.12), and its headers lack that flag and IORING_REGISTER_CLOCK: both
 *   are defined here, the clock is registered by register_monotonic_clock(),
 *   and the backend enters the kernel itself (enter_getevents()) after
 *   publishing the SQ tail as liburing's own flush does (publish_sq()).
 * - The SQ flags (IORING_SQ_TASKRUN, IORING_SQ_CQ_OVERFLOW) have no
 *   accessor: sq_flags().
 * - The SQ's size and an SQE's index in it have none either: sq_entries(),
 *   sqe_index().
 * On a newer liburing, the first two may become its own calls; the field
 * reads stay valid as long as struct io_uring keeps its 2.x layout.
 */
#ifndef TICKLOOP_LOOP_URING_SHIM_H
#define TICKLOOP_LOOP_URING_SHIM_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <liburing.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Linux 6.12 uapi that Debian's liburing 2.3 headers lack. */
#ifndef IORING_ENTER_ABS_TIMER
#define IORING_ENTER_ABS_TIMER (1U << 5)
#endif
#ifndef IORING_FEAT_MIN_TIMEOUT
#define IORING_FEAT_MIN_TIMEOUT (1U << 15)
#endif

namespace tl::detail::uring_shim {

inline constexpr unsigned kRegisterClock = 29; /* IORING_REGISTER_CLOCK */
struct ClockRegister {                         /* struct io_uring_clock_register */
    uint32_t clockid;
    uint32_t resv[3];
};

/* The kernel's SQ flags word (IORING_SQ_TASKRUN, IORING_SQ_CQ_OVERFLOW). */
inline unsigned sq_flags(const struct io_uring *ring) noexcept {
    return IO_URING_READ_ONCE(*ring->sq.kflags);
}

/* Publishes the queued SQEs to the kernel (liburing's flush: the ring is
   never SQPOLL) and returns how many the next enter submits. */
inline unsigned publish_sq(struct io_uring *ring) noexcept {
    io_uring_sq &sq = ring->sq;
    unsigned tail = sq.sqe_tail;
    if (sq.sqe_head != tail) {
        sq.sqe_head = tail;
        IO_URING_WRITE_ONCE(*sq.ktail, tail);
    }
    return tail - *sq.khead;
}

/* The number of SQEs in the ring, and an SQE's index among them. */
inline unsigned sq_entries(const struct io_uring *ring) noexcept {
    return ring->sq.ring_entries;
}
inline size_t sqe_index(const struct io_uring *ring, const struct io_uring_sqe *sqe) noexcept {
    return (size_t)(sqe - ring->sq.sqes);
}

/* io_uring_enable_rings(), which Debian's liburing 2.3 declares but does not
   export: the register call is all it does. 0 or a negative errno. */
inline int enable_rings(struct io_uring *ring) noexcept {
    if (syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) <
        0)
        return -errno;
    return 0;
}

/* IORING_REGISTER_CLOCK with CLOCK_MONOTONIC (Linux 6.12): true if the
   kernel took it, and IORING_ENTER_ABS_TIMER may then be used. */
inline bool register_monotonic_clock(struct io_uring *ring) noexcept {
    ClockRegister reg;
    std::memset(&reg, 0, sizeof reg);
    reg.clockid = CLOCK_MONOTONIC;
    return syscall(__NR_io_uring_register, ring->ring_fd, kRegisterClock, &reg, 0) == 0;
}

/* io_uring_enter(submit, min_complete 1, flags | EXT_ARG, arg): the SQEs
   publish_sq() counted, and a wait for one completion with arg's timeout.
   Returns >= 0 or a negative errno. */
inline int enter_getevents(struct io_uring *ring, unsigned submit, unsigned wait_nr, unsigned flags,
                           struct io_uring_getevents_arg *arg) noexcept {
    long r = syscall(__NR_io_uring_enter, ring->ring_fd, submit, wait_nr,
                     flags | IORING_ENTER_EXT_ARG, arg, sizeof *arg);
    return r < 0 ? -errno : (int)r;
}

/* Linux 6.12's minimum wait (IORING_FEAT_MIN_TIMEOUT): the word liburing
   2.3 calls `pad` is the uapi's min_wait_usec. */
inline void set_min_wait(struct io_uring_getevents_arg *arg, uint32_t usec) noexcept {
    arg->pad = usec;
}

} // namespace tl::detail::uring_shim

#endif
