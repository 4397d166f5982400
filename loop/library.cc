/* SPDX-License-Identifier: MIT */
/*
 * What the library answers without a loop: the text of an error number
 * (tl_strerror) and its version (tl_version).
 */
#include <cerrno>
#include <cstring>

#include "tickloop/tickloop.h"

extern "C" {

/* The generic strerror text, except where the library gives the errno a
   narrower meaning and the generic one misleads ("No such file or
   directory" for an unknown timer backend). Each message still says which
   errno it stands for. */
TL_API const char *tl_strerror(int err) {
    switch (err) {
    case 0:
        return "success";
    case -ENOENT:
        return "no such timer backend (ENOENT; tl_timer_backend_names lists the registered ones)";
    case -EBUSY:
        return "busy (EBUSY): handle already active, loop still has active handles, or call "
               "made from inside the loop's own callbacks";
    case -ENOSPC:
        return "too many active timers (ENOSPC; tl_loop_options.max_timers)";
    case -EEXIST:
        return "already exists (EEXIST): fd watched by another watcher of this loop, signal "
               "watched by another loop, or timer backend name already registered";
    case -ENOSYS:
        return "not available (ENOSYS): I/O backend missing from this build or kernel";
    case -EPERM:
        return "operation not permitted (EPERM): fd cannot be polled (regular file, "
               "directory, /dev/null: what epoll refuses), or the kernel refused io_uring";
    default:
        break;
    }
    if (err > 0 || err < -4095) return "unknown error";
    const char *msg = strerrordesc_np(-err);
    return msg ? msg : "unknown error";
}

#define TL_STR2(x) #x
#define TL_STR(x) TL_STR2(x)
TL_API const char *tl_version(void) {
    return TL_STR(TL_VERSION_MAJOR) "." TL_STR(TL_VERSION_MINOR) "." TL_STR(TL_VERSION_PATCH);
}

} // extern "C"
