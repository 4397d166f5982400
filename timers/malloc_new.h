/* SPDX-License-Identifier: MIT */
/*
 * Allocation without libstdc++ for the objects the library creates with new
 * (the I/O backends).
 */
#ifndef TICKLOOP_TIMERS_MALLOC_NEW_H
#define TICKLOOP_TIMERS_MALLOC_NEW_H

#include <cstddef>
#include <cstdlib>

namespace tl::detail {

/* Base of every object the library creates with new: new and delete go to
 * malloc and free, and new yields nullptr when malloc fails (a noexcept
 * allocation function makes the new-expression check for it). The global
 * operator new/delete live in libstdc++; these do not, so C programs link the
 * library with cc alone. Objects are created with plain `new T(...)`, never
 * `new (std::nothrow)`, and arrays with calloc. The backends' instances are
 * placed into calloc'd memory (backend_glue.h) and need none of it. */
struct MallocNew {
    static void *operator new(std::size_t size) noexcept { return std::malloc(size); }
    static void operator delete(void *p) noexcept { std::free(p); }
};

} // namespace tl::detail

#endif /* TICKLOOP_TIMERS_MALLOC_NEW_H */
