/* SPDX-License-Identifier: MIT */
/*
 * The parts both timing wheels (wheel.cc, hwheel.cc) share, under one
 * vocabulary:
 * - tick:      tick_ns of time; the wheels count time in ticks.
 * - fire tick: e = ceil(deadline / tick), the first tick boundary at or
 *              after a deadline; a timer is handed out once now's tick
 *              (floor(now / tick)) reaches it, or in the tick before it when
 *              its deadline has already passed (a partly elapsed tick).
 * - cur:       the wheel's position, in ticks; no slot holds a timer whose
 *              fire tick is behind it.
 * - slot:      a circular list of timers (slot_list.h) plus a lower bound of
 *              their deadlines (slot_min); an occupancy bitmap has one bit
 *              per slot, scanned with ctz.
 * - ready:     the list of timers already found due and not yet returned
 *              (also those inserted with a fire tick behind cur); popped
 *              from its head, unaligned deadlines first within a tick.
 * - lazy:      a timer rescheduled later and left in its old slot; the walk
 *              of that slot (due no later than the old deadline) re-files it.
 *
 * Defaults, used when the loop options leave tick_ns / wheel_slots at 0:
 * - kDefaultTickNs = 1 ms: the granularity people expect of I/O timeouts
 *   (libuv and Netty count in milliseconds); a wheel fires at most one tick
 *   late, and finer ticks cost more cascades (hwheel) or more slots walked
 *   per second (wheel) for timeouts that are seconds long.
 * - kDefaultWheelSlots = 4096: one revolution is 4.096 s of 1 ms ticks, so
 *   most I/O timeouts never wait a round; the slot arrays (16 bytes a slot)
 *   stay at 64 KiB, inside L2.
 */
#ifndef TICKLOOP_TIMERS_WHEEL_CORE_H
#define TICKLOOP_TIMERS_WHEEL_CORE_H

#include <cstdint>

#include "timers.h"

namespace tl::detail {

inline constexpr uint64_t kDefaultTickNs = 1000000;
inline constexpr uint32_t kDefaultWheelSlots = 4096;

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_WHEEL_CORE_H */
