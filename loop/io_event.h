/* SPDX-License-Identifier: MIT */
/*
 * Internal to loop/: the vocabulary of I/O events shared by the loop and
 * both I/O backends: ReadyEvent, the registration tags (io_tag, kBackendTag)
 * and the request kinds they carry (REQ_*, req_tag), TL_READ/TL_WRITE <->
 * poll(2) bits, and the number of events a wait returns.
 */
#ifndef TICKLOOP_LOOP_IO_EVENT_H
#define TICKLOOP_LOOP_IO_EVENT_H

#include <cstdint>

#include "tickloop/tickloop.h"

namespace tl::detail {

/* One readiness report from an I/O backend: the tag given at registration
 * (fd in the low half, registration generation in the high half) and
 * TL_READ|TL_WRITE|TL_ERROR|TL_HUP. */
struct ReadyEvent {
    uint64_t tag;
    unsigned revents;
    /* A completion of a stream or listener request (io_uring's completion
       path; revents is then kCompletion): the CQE's res and flags. */
    int32_t res = 0;
    uint32_t cflags = 0;
};

/* ReadyEvent::revents of a completion: no readiness bit, never masked away. */
inline constexpr unsigned kCompletion = 1u << 31;
inline constexpr unsigned kCompletionKindMask = 3u; /* REQ_RECV, REQ_SEND, REQ_ACCEPT */

inline constexpr uint64_t io_tag(int fd, uint32_t gen) noexcept {
    return (uint64_t)gen << 32 | (uint32_t)fd;
}
inline constexpr int io_tag_fd(uint64_t tag) noexcept {
    return (int)(uint32_t)tag;
}
inline constexpr uint32_t io_tag_gen(uint64_t tag) noexcept {
    return (uint32_t)(tag >> 32);
}
/* A backend's own tag (timerfd, internal SQEs): generation 0 names no registration. */
inline constexpr uint64_t kBackendTag = UINT64_MAX >> 32;

/* The requests a completion backend makes for streams and listeners carry
 * their registration's tag with the request's kind in the top two bits
 * (generations stay below 2^30, so a registration's own tag has kind 0 and
 * a tagged request never passes io_current() as a registration). */
enum : unsigned { REQ_POLL = 0, REQ_RECV = 1, REQ_SEND = 2, REQ_ACCEPT = 3 };
inline constexpr uint32_t kMaxGen = (1u << 30) - 1;
inline constexpr uint64_t req_tag(uint64_t tag, unsigned kind) noexcept {
    return tag | (uint64_t)kind << 62;
}
inline constexpr unsigned req_kind(uint64_t tag) noexcept {
    return (unsigned)(tag >> 62);
}
inline constexpr uint64_t req_base(uint64_t tag) noexcept {
    return tag & ~(3ull << 62);
}
/* Buffers per vectored send on the completion path (a request's buffers
 * beyond it go in the following sends); the backend keeps that many iovecs
 * per SQE. */
inline constexpr int kSendIovMax = 16;

/* TL_READ/TL_WRITE <-> poll(2) bits. epoll's EPOLLIN/OUT/PRI/ERR/HUP/RDHUP
 * have the same values as poll's, so one pair serves both backends. */
inline constexpr uint32_t kPollIn = 0x001, kPollPri = 0x002, kPollOut = 0x004, kPollErr = 0x008,
                          kPollHup = 0x010, kPollNval = 0x020;

inline uint32_t poll_bits(unsigned events) noexcept {
    return (events & TL_READ ? kPollIn : 0u) | (events & TL_WRITE ? kPollOut : 0u);
}

/* The one mapping both backends use. POLLRDHUP (the peer shut down its
 * writing side) is not TL_HUP: the connection still takes writes, and the
 * half-close shows as TL_READ with read() returning 0, as with epoll, which
 * reports RDHUP only when asked (tickloop never asks). io_uring adds RDHUP
 * to every poll, so it must be ignored here. POLLNVAL (io_uring only: the
 * fd was closed under the poll) is an error. */
inline unsigned tl_events(uint32_t bits) noexcept {
    unsigned r = 0;
    if (bits & (kPollIn | kPollPri)) r |= TL_READ;
    if (bits & kPollOut) r |= TL_WRITE;
    if (bits & (kPollErr | kPollNval)) r |= TL_ERROR;
    if (bits & kPollHup) r |= TL_HUP;
    return r;
}

/* Events a wait returns at most. Level-triggered polling reports the rest next
   iteration; 256 is libev's and libuv's order of magnitude. */
inline constexpr int kMaxEvents = 256;

} // namespace tl::detail

#endif /* TICKLOOP_LOOP_IO_EVENT_H */
