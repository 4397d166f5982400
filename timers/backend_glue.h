/* SPDX-License-Identifier: MIT */
/*
 * The one way a built-in backend becomes a tl_timer_backend: a C++ class with
 * the operations below, turned into the C vtable by make_backend<Impl>(name).
 * All four built-ins use it; a custom backend written in C++ may copy the
 * pattern (examples/custom_backend.c shows one written in C).
 *
 * What Impl provides (all noexcept, none may throw or allocate with new):
 *   static constexpr uint32_t kCaps;            TL_TIMER_CAP_* it guarantees
 *   static bool accepts(const tl_timer_config &cfg);   cfg usable?
 *   Impl(const tl_timer_config &cfg, uint64_t now);    cannot fail
 *   bool allocate();          the structure's own arrays; false on ENOMEM
 *   int insert(tl_timer *t);  void remove(tl_timer *t);
 *   void reschedule(tl_timer *t, uint64_t deadline);
 *   uint64_t next_expiry();   tl_timer *pop_expired(uint64_t now);
 *   size_t count() const;     const char *check() const;   (the walker)
 * and, optionally, uint64_t next_wakeup() (timer_backend.h: a backend that
 * keeps deadline order and lets the loop sleep into the timers' leeway) and
 * int reserve_more(const tl_timer *t, size_t n) (timer_backend.h's reserve:
 * a backend whose insert allocates).
 * with the Pre/Post conditions of timer_backend.h.
 *
 * The instance lives in calloc'd memory (placement new, explicit destructor),
 * so no C++ runtime allocation is involved. Debug builds run Impl::check()
 * after every insert, remove, reschedule and pop, aborting with its message
 * (libev's EV_FREQUENT_CHECK). Up to kCheckEveryOpUpTo timers that is every
 * operation; above it the O(n) walk runs once per count / kCheckAmortized
 * operations, a bounded cost per operation, so that the tests with a million
 * timers stay linear under ASan. Release builds (NDEBUG) compile the checks
 * away.
 */
#ifndef TICKLOOP_TIMERS_BACKEND_GLUE_H
#define TICKLOOP_TIMERS_BACKEND_GLUE_H

#include <cstdio>
#include <cstdlib>
#include <new>

#include "builtin.h"
#include "check.h"

namespace tl::detail {

#ifndef NDEBUG
inline constexpr size_t kCheckEveryOpUpTo = 64;
inline constexpr size_t kCheckAmortized = 4;
#endif

template <class Impl>
struct BackendGlue {
    struct Instance {
        Impl impl;
#ifndef NDEBUG
        size_t ops_since_check = 0;
#endif
        Instance(const tl_timer_config &cfg, uint64_t now) noexcept : impl(cfg, now) {}
    };

    static Impl &impl(void *self) noexcept {
        return static_cast<Instance *>(self)->impl;
    }

    /* Debug builds: the walker after an operation (see the header comment). */
    static void verify(void *self, const char *op) noexcept {
#ifndef NDEBUG
        Instance *in = static_cast<Instance *>(self);
        size_t n = in->impl.count();
        if (n > kCheckEveryOpUpTo && ++in->ops_since_check < n / kCheckAmortized) return;
        in->ops_since_check = 0;
        if (const char *broken = in->impl.check()) {
            std::fprintf(stderr, "tickloop: timer backend invariant broken after %s: %s\n", op,
                         broken);
            std::abort();
        }
#else
        (void)self;
        (void)op;
#endif
    }

    static void *create(const tl_timer_config *cfg, uint64_t now) noexcept {
        if (!cfg || !Impl::accepts(*cfg)) return nullptr;
        void *mem = std::calloc(1, sizeof(Instance));
        if (!mem) return nullptr;
        Instance *in = new (mem) Instance(*cfg, now);
        if (!in->impl.allocate()) {
            in->~Instance();
            std::free(mem);
            return nullptr;
        }
        return in;
    }
    static void destroy(void *self) noexcept {
        if (!self) return;
        static_cast<Instance *>(self)->~Instance();
        std::free(self);
    }
    static int insert(void *self, tl_timer *t) noexcept {
        int r = impl(self).insert(t);
        verify(self, "insert");
        return r;
    }
    static void remove(void *self, tl_timer *t) noexcept {
        impl(self).remove(t);
        verify(self, "remove");
    }
    [[gnu::always_inline]] static void reschedule(void *self, tl_timer *t,
                                                  uint64_t deadline) noexcept {
        impl(self).reschedule(t, deadline);
        verify(self, "reschedule");
    }
    static uint64_t next_expiry(void *self) noexcept {
        return impl(self).next_expiry();
    }
    static tl_timer *pop_expired(void *self, uint64_t now) noexcept {
        tl_timer *t = impl(self).pop_expired(now);
        verify(self, "pop_expired");
        return t;
    }
    static constexpr bool kHasNextWakeup = requires(Impl & i) {
        i.next_wakeup();
    };
    static uint64_t next_wakeup(void *self) noexcept {
        if constexpr (kHasNextWakeup)
            return impl(self).next_wakeup();
        else
            return impl(self).next_expiry();
    }
    static constexpr bool kHasReserve = requires(Impl & i, const tl_timer *t) {
        i.reserve_more(t, size_t{1});
    };
    static int reserve(void *self, const tl_timer *t, size_t n) noexcept {
        if constexpr (kHasReserve)
            return impl(self).reserve_more(t, n);
        else
            return 0;
    }
    static size_t count(void *self) noexcept {
        return impl(self).count();
    }
    static const char *check(void *self) noexcept {
        return impl(self).check();
    }
};

/* The vtable of Impl under name. */
template <class Impl>
constexpr tl_timer_backend make_backend(const char *name) noexcept {
    using G = BackendGlue<Impl>;
    return tl_timer_backend{name,
                            G::create,
                            G::destroy,
                            G::insert,
                            G::remove,
                            G::reschedule,
                            G::next_expiry,
                            G::pop_expired,
                            G::count,
                            Impl::kCaps,
                            G::kHasNextWakeup ? G::next_wakeup : nullptr,
                            G::kHasReserve ? G::reserve : nullptr,
                            {}};
}

/* Impl's walker, for the registry's tl_detail_timers_check. */
template <class Impl>
const char *backend_check(void *self) noexcept {
    return BackendGlue<Impl>::check(self);
}

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_BACKEND_GLUE_H */
