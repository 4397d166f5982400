/* SPDX-License-Identifier: MIT */
/*
 * 1e6 timers due at once beside a socket a thread writes to every
 * millisecond, once per I/O backend (TICKLOOP_IO) and timer backend: every
 * timer runs exactly once, never early, in order, and the loop serves the
 * socket between chunks of the dispatch. The worst fd-service delay is
 * printed (TL_STORM_TIMERS shrinks the storm, e.g. under valgrind).
 */
#define _GNU_SOURCE
#include "faults_helpers.h"

/* ------------------------------------------------------------------------ */
/* A storm of 1e6 due timers beside a socket written every millisecond      */
/* ------------------------------------------------------------------------ */

/* The default max_timers_per_iteration (tickloop.h). */
#define kDefaultCap 8192

struct ping {
    uint64_t sent_ns;
    uint64_t fired_at_send; /* storm callbacks run when it was sent */
};

struct pinger {
    int fd;
    atomic_int stop;
    atomic_int sent;
    atomic_ullong fired; /* storm callbacks run so far, published by the loop */
};

/* Writes the send time every millisecond until told to stop. */
static void *ping_thread(void *arg) {
    struct pinger *pg = arg;
    while (!atomic_load(&pg->stop)) {
        struct ping ping = {mono_ns(), atomic_load(&pg->fired)};
        if (write(pg->fd, &ping, sizeof ping) == (ssize_t)sizeof ping)
            atomic_fetch_add(&pg->sent, 1);
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return NULL;
}

struct storm {
    struct record rec;
    struct pinger *pinger;
    uint64_t worst_delay;
    uint64_t worst_callbacks; /* storm callbacks between a ping's send and its service */
    size_t pings;
    size_t fired_at_first_ping; /* SIZE_MAX until the socket is served */
};

static void on_storm_timer(tl_loop *loop, tl_timer *t) {
    struct storm *s = t->data;
    size_t i = (size_t)(t - s->rec.timers);
    s->rec.seen[i]++;
    /* deadlines[] is not kept for the storm (memory); t->deadline is valid. */
    if (tl_now(loop) < t->deadline) s->rec.early++;
    if (s->rec.fired && (t->deadline < s->rec.last_deadline ||
                         (t->deadline == s->rec.last_deadline && i < s->rec.last_index)))
        s->rec.order_breaks++;
    s->rec.last_deadline = t->deadline;
    s->rec.last_index = i;
    s->rec.fired++;
    atomic_store_explicit(&s->pinger->fired, s->rec.fired, memory_order_relaxed);
}

static void on_ping(tl_loop *loop, tl_io *w, unsigned revents) {
    (void)loop;
    (void)revents;
    struct storm *s = w->data;
    struct ping ping;
    while (read(w->fd, &ping, sizeof ping) == (ssize_t)sizeof ping) {
        uint64_t now = mono_ns();
        if (now - ping.sent_ns > s->worst_delay) s->worst_delay = now - ping.sent_ns;
        if (s->rec.fired - ping.fired_at_send > s->worst_callbacks)
            s->worst_callbacks = s->rec.fired - ping.fired_at_send;
        s->pings++;
    }
    if (s->fired_at_first_ping == SIZE_MAX) s->fired_at_first_ping = s->rec.fired;
}

static void on_storm_over(tl_loop *loop, tl_timer *t) {
    tl_loop_stop(loop);
    (void)t;
}

BACKEND_TEST_OPTS(faults, storm_of_1e6_due_timers_serves_a_socket_promptly, .timeout = 300) {
    size_t n = 1000000;
    const char *env = getenv("TL_STORM_TIMERS");
    if (env && *env) n = strtoull(env, NULL, 10);
    /* The default cap for the real storm; a smaller one when TL_STORM_TIMERS
       shrinks it, so that it still spans many batches. */
    uint32_t cap = n >= 1000000 ? kDefaultCap : (uint32_t)(n / 16 ? n / 16 : 1);
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.timers = p->name;
    opts.max_timers_per_iteration = cap;
    tl_loop *loop;
    cr_assert_eq(tl_loop_new(&loop, &opts), 0);
    struct storm s;
    memset(&s, 0, sizeof s);
    s.rec.backend = p->name;
    s.rec.n = n;
    s.rec.timers = calloc(n, sizeof *s.rec.timers);
    s.rec.seen = calloc(n, sizeof *s.rec.seen);
    cr_assert(s.rec.timers && s.rec.seen);
    s.fired_at_first_ping = SIZE_MAX;
    /* All due within 100 us, in a jumbled order. */
    for (size_t i = 0; i < n; i++) {
        tl_timer_init(&s.rec.timers[i], on_storm_timer, &s);
        cr_assert_eq(tl_timer_start(loop, &s.rec.timers[i], (i * 7919) % 100 * US, 0), 0);
    }
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    tl_io w;
    tl_io_init(&w, sv[0], on_ping, &s);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), 0);
    struct pinger pg = {.fd = sv[1]};
    s.pinger = &pg;
    pthread_t thread;
    usleep(2000); /* every storm timer is due (wheels: past the next tick) */
    cr_assert_eq(pthread_create(&thread, NULL, ping_thread, &pg), 0);
    /* A ping is waiting when the storm starts (at most 10 s for the thread). */
    for (int i = 0; i < 10000 && atomic_load(&pg.sent) == 0; i++) usleep(1000);
    cr_assert_gt(atomic_load(&pg.sent), 0, "the ping thread never wrote");
    uint64_t start = mono_ns();
    /* Stops the run 20 ms after the storm, so the last pings are served. */
    tl_timer over;
    tl_timer_init(&over, on_storm_over, NULL);
    while (s.rec.fired < n) cr_assert_eq(tl_loop_run(loop, TL_RUN_ONCE), 1);
    uint64_t drained = mono_ns() - start;
    cr_assert_eq(tl_timer_start(loop, &over, 20 * MS, 0), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 1);
    atomic_store(&pg.stop, 1);
    pthread_join(thread, NULL);
    record_check(&s.rec);
    cr_assert_lt(s.fired_at_first_ping, n, "%s: the socket waited for the whole storm", p->name);
    fprintf(stderr,
            "storm: %s, %s: %zu timers drained in %.1f ms; socket first served after %zu "
            "callbacks; worst fd-service delay %.0f us (%llu callbacks) over %zu pings\n",
            p->name, tl_loop_io_name(loop), n, drained / 1e6, s.fired_at_first_ping,
            s.worst_delay / 1e3, (unsigned long long)s.worst_callbacks, s.pings);
    /* The bound that holds on any machine is in callbacks, not time: a ping
       that arrives during a batch waits for the rest of it, or for one more
       if it arrives just after the wait collected events. The ping thread
       reads the count before its write, and a busy machine may preempt it in
       between while the loop goes on (a wheel runs a few hundred callbacks in
       20 us): half a batch of slack for that. Without the cap it would be
       the whole storm. */
    cr_assert_leq(s.worst_callbacks, 2 * (uint64_t)cap + cap / 2,
                  "%s: a ping waited for %llu callbacks", p->name,
                  (unsigned long long)s.worst_callbacks);
    cr_assert_eq(tl_io_stop(loop, &w), 0);
    free_loop(loop);
    close(sv[0]);
    close(sv[1]);
    free(s.rec.timers);
    free(s.rec.seen);
}
