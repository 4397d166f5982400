/* SPDX-License-Identifier: MIT */
/*
 * Loop hooks: PREPARE, CHECK and IDLE callbacks at fixed points of each
 * iteration (loop.cc's iterate() says where).
 *
 * Each kind is a list in start order. Dispatch walks it with the list's
 * cursor, which tl_hook_stop advances past the node it unlinks, so a callback
 * may stop or free any hook, itself included, without the walk touching freed
 * memory. A hook started (or restarted) during the walk is appended with a
 * start sequence newer than the walk's, and the walk ends at the first such
 * node: it runs from the next iteration, and a hook that restarts itself
 * cannot keep one dispatch going forever.
 */
#include <cerrno>
#include <cstring>
#include <type_traits>

#include "loop/handle_flags.h"
#include "loop/hook.h"
#include "loop/list.h"
#include "loop/state.h"
#include "loop/verify.h"

using namespace tl::detail;

namespace {

bool valid_kind(uint32_t kind) noexcept {
    return kind < (uint32_t)kHookKinds;
}

bool active(const tl_hook *h) noexcept {
    return h->flags & HOOK_ACTIVE;
}

bool unref(const tl_hook *h) noexcept {
    return h->flags & HOOK_UNREF;
}

} // namespace

namespace tl::detail {

void hooks_run(tl_loop *loop, tl_hook_kind kind) noexcept {
    OrderedList<tl_hook> &list = loop->hooks[kind];
    if (!list.head) return;
    /* Hooks started from here on have seq >= end and wait for next time. */
    const uint64_t end = loop->hook_seq;
    for (tl_hook *h = list.head; h && h->seq < end; h = list.cursor) {
        list.cursor = h->next;
        h->cb(loop, h); /* may stop or free h or any other hook */
    }
    list.cursor = nullptr;
}

} // namespace tl::detail

extern "C" {

TL_API void tl_hook_init(tl_hook *h, tl_hook_kind kind, tl_hook_cb cb, void *data) {
    if (!h) return;
    *h = tl_hook{};
    h->cb = cb;
    h->data = data;
    /* Stored as an integer: C may pass any int, and start checks it. */
    std::underlying_type_t<tl_hook_kind> raw;
    static_assert(sizeof raw == sizeof kind);
    std::memcpy(&raw, &kind, sizeof raw);
    h->kind = (uint32_t)raw;
}

TL_API int tl_hook_start(tl_loop *loop, tl_hook *h) {
    if (!loop || !h) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (active(h)) return -EBUSY;
    if (!h->cb || !valid_kind(h->kind)) return -EINVAL;
    h->loop = loop;
    h->seq = loop->hook_seq++;
    h->flags |= HOOK_ACTIVE;
    loop->hooks[h->kind].append(h);
    if (h->kind == TL_HOOK_IDLE) ++loop->idle_hooks;
    ++loop->stats.hooks_active;
    handle_activated(loop, unref(h));
    return 0;
}

TL_API int tl_hook_stop(tl_loop *loop, tl_hook *h) {
    if (!loop || !h) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (!active(h)) return 0;
    if (h->loop != loop) return -EINVAL;
    loop->hooks[h->kind].unlink(h);
    h->flags &= ~HOOK_ACTIVE;
    h->loop = nullptr;
    if (h->kind == TL_HOOK_IDLE) --loop->idle_hooks;
    --loop->stats.hooks_active;
    handle_deactivated(loop, unref(h));
    return 0;
}

TL_API int tl_hook_active(const tl_hook *h) {
    return h && active(h) ? 1 : 0;
}

TL_API int tl_hook_set_ref(tl_loop *loop, tl_hook *h, int ref) {
    if (!loop || !h) return -EINVAL;
    TL_CHECK_LOOP_THREAD(loop);
    if (active(h) && h->loop != loop) return -EINVAL;
    bool was = unref(h);
    if (ref)
        h->flags &= ~HOOK_UNREF;
    else
        h->flags |= HOOK_UNREF;
    if (active(h)) handle_ref_changed(loop, was, !ref);
    return 0;
}

} // extern "C"
