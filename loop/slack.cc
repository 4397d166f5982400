/* SPDX-License-Identifier: MIT */
/*
 * tl_loop_options.timer_slack_ns: the thread's timer slack (PR_SET_TIMERSLACK)
 * while a loop runs on it, and the slack the thread had before, given back
 * when the last such loop is freed.
 */
#include <pthread.h>
#include <sys/prctl.h>

#include "loop/slack.h"
#include "loop/state.h"

using namespace tl::detail;

namespace {

/* The thread's timer slack as the loops running on it left it. Slack belongs
 * to the thread, so this is per thread: `loops` counts the loops with a
 * timer_slack_ns that ran here and are not freed, `saved` is the slack the
 * thread had before the first of them, `current` the value last set (0:
 * none), so a run whose loop wants what is already set makes no syscall. */
struct ThreadSlack {
    uint64_t current;
    uint64_t saved;
    uint32_t loops;
};
thread_local ThreadSlack thread_slack;

} // namespace

namespace tl::detail {

/* One prctl when this loop's slack differs from the thread's current one
 * (the first run, or another loop ran in between). */
void apply_timer_slack(tl_loop *loop) noexcept {
    if (!loop->timer_slack_ns) return;
    pthread_t self = pthread_self();
    if (!loop->slack_applied || !pthread_equal(loop->slack_thread, self)) {
        /* Moved to another thread: that thread keeps the slack the loop set
           (its thread-local state cannot be reached from here). */
        if (thread_slack.loops++ == 0) {
            int old = prctl(PR_GET_TIMERSLACK);
            thread_slack.saved = old > 0 ? (uint64_t)old : 0;
            thread_slack.current = 0;
        }
        loop->slack_applied = true;
        loop->slack_thread = self;
    }
    if (thread_slack.current == loop->timer_slack_ns) return;
    if (prctl(PR_SET_TIMERSLACK, (unsigned long)loop->timer_slack_ns) == 0)
        thread_slack.current = loop->timer_slack_ns;
}

/* Freed on the thread it set the slack of: the last such loop gives the
 * thread back the slack it had (0 restores the default). */
void release_timer_slack(tl_loop *loop) noexcept {
    if (!loop->slack_applied || !pthread_equal(loop->slack_thread, pthread_self())) return;
    if (--thread_slack.loops > 0) return;
    prctl(PR_SET_TIMERSLACK, (unsigned long)thread_slack.saved);
    thread_slack.current = 0;
}

} // namespace tl::detail
