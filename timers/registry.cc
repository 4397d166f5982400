/* SPDX-License-Identifier: MIT */
/*
 * The timer-backend registry: the built-in backends plus any the program
 * registers, looked up by name when a loop is created.
 *
 * Registration is rare (start-up) and lookups happen once per loop, so a
 * mutex-protected fixed array is enough; it never allocates, so registering
 * cannot fail for lack of memory.
 */
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <pthread.h>

#include "builtin.h"
#include "check.h"
#include "wheel_core.h"

namespace tl::detail {
namespace {

struct Builtin {
    const tl_timer_backend *backend;
    check_fn check;
};

/* Built-ins, in the order tl_timer_backend_names() lists them. */
const Builtin builtins[] = {
    {&heap2_backend, heap2_check},
    {&heap4_backend, heap4_check},
    {&wheel_backend, wheel_check},
    {&hwheel_backend, hwheel_check},
};
constexpr size_t kBuiltins = sizeof(builtins) / sizeof(builtins[0]);

/* Room for custom backends; a program registers a handful at most. */
constexpr size_t kMaxCustom = 32;
/* Names are short identifiers ("hwheel"); the bound keeps them printable in logs. */
constexpr size_t kMaxNameLength = 63;

/* pthread rather than std::mutex: std::mutex::lock throws through
   std::__throw_system_error, which would make the library need libstdc++. */
pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
const tl_timer_backend *custom[kMaxCustom];
size_t custom_count;

/* Holds registry_mutex for the enclosing scope. */
class RegistryLock {
public:
    RegistryLock() noexcept { pthread_mutex_lock(&registry_mutex); }
    ~RegistryLock() { pthread_mutex_unlock(&registry_mutex); }
    RegistryLock(const RegistryLock &) = delete;
    RegistryLock &operator=(const RegistryLock &) = delete;
};

const tl_timer_backend *find_locked(const char *name) {
    for (const Builtin &b : builtins)
        if (std::strcmp(b.backend->name, name) == 0) return b.backend;
    for (size_t i = 0; i < custom_count; ++i)
        if (std::strcmp(custom[i]->name, name) == 0) return custom[i];
    return nullptr;
}

} // namespace

tl_timer_config timer_config(uint64_t tick_ns, uint32_t wheel_slots) noexcept {
    return tl_timer_config{tick_ns ? tick_ns : kDefaultTickNs,
                           wheel_slots ? wheel_slots : kDefaultWheelSlots};
}

const char *check_failed(const char *fmt, ...) {
    static thread_local char message[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return message;
}

} // namespace tl::detail

using namespace tl::detail;

extern "C" {

TL_API int tl_timer_backend_register(const tl_timer_backend *b) {
    if (!b || !b->name || !b->create || !b->destroy || !b->insert || !b->remove ||
        !b->next_expiry || !b->pop_expired || !b->count)
        return -EINVAL;
    /* A bit this library does not know promises something it cannot check. */
    if (b->caps & ~uint32_t(TL_TIMER_CAP_EXACT)) return -EINVAL;
    /* Reserved words are where later optional operations go (docs/abi.md). */
    for (void *word : b->reserved)
        if (word) return -EINVAL;
    size_t len = std::strlen(b->name);
    if (len == 0 || len > kMaxNameLength) return -EINVAL;
    RegistryLock lock;
    if (find_locked(b->name)) return -EEXIST;
    if (custom_count == kMaxCustom) return -ENOSPC;
    custom[custom_count++] = b;
    return 0;
}

TL_API const tl_timer_backend *tl_timer_backend_find(const char *name) {
    if (!name) return nullptr;
    RegistryLock lock;
    return find_locked(name);
}

TL_API size_t tl_timer_backend_names(const char **names, size_t cap) {
    RegistryLock lock;
    size_t total = kBuiltins + custom_count;
    if (!names) return total;
    for (size_t i = 0; i < total && i < cap; ++i)
        names[i] = i < kBuiltins ? builtins[i].backend->name : custom[i - kBuiltins]->name;
    return total;
}

const char *tl_detail_timers_check(const tl_timer_backend *b, void *self) {
    for (const Builtin &builtin : builtins)
        if (builtin.backend == b) return builtin.check(self);
    return nullptr;
}

} // extern "C"
