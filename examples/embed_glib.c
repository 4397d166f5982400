/* SPDX-License-Identifier: MIT */
/*
 * embed_glib.c: tickloop running inside GLib's main loop.
 *
 * A custom GSource carries tickloop into GLib:
 *   prepare:  the timeout GLib may sleep is tl_loop_timeout(), in ms rounded
 *             up (never wakes before a tickloop timer);
 *   check:    ready if tickloop's fd (tl_loop_fd, added with
 *             g_source_add_unix_fd) is readable or its timeout ran out;
 *   dispatch: tl_loop_run(TL_RUN_NOWAIT), which never blocks.
 * GLib keeps its own sources; here a GLib fd watch (g_unix_fd_add) does the
 * host's part of the demo, and a GLib timeout guards against a hang.
 *
 * The demo is embed_poll.c's: a tickloop timer ticks every 20 ms and writes
 * to a pipe GLib watches; GLib's callback answers on a second pipe that a
 * tickloop I/O watcher reads; after 10 ticks tickloop has no active handle
 * left and the GSource quits the GMainLoop. Exit status 0 if every tick
 * arrived (never early) and was answered.
 *
 *   embed_glib [--io epoll|io_uring|auto] [--timers NAME] [--help]
 */
#define _POSIX_C_SOURCE 200809L
#include <glib-unix.h>
#include <glib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "example_options.h"
#include "loop_new_error.h"

enum { kTicks = 10 };
static const uint64_t kTickNs = 20 * 1000000ull;

struct app {
    tl_loop *loop;
    GMainLoop *main_loop;
    tl_timer tick;
    tl_io answers;
    int to_host[2]; /* tickloop writes, GLib reads */
    int to_loop[2]; /* GLib writes, tickloop reads */
    int ticks, answers_read, host_reads, early, dispatches, timed_out;
};

/* ---- tickloop's side --------------------------------------------------- */

static void on_tick(tl_loop *loop, tl_timer *t) {
    struct app *a = t->data;
    if (tl_now(loop) < t->deadline - t->repeat) a->early++; /* re-armed before the callback */
    if (write(a->to_host[1], "t", 1) != 1) perror("write");
    if (++a->ticks == kTicks) tl_timer_stop(loop, t);
}

static void on_answer(tl_loop *loop, tl_io *w, unsigned revents) {
    struct app *a = w->data;
    char buf[64];
    ssize_t n = (revents & TL_READ) ? read(w->fd, buf, sizeof buf) : 0;
    if (n > 0) a->answers_read += (int)n;
    if (a->answers_read >= kTicks) tl_io_stop(loop, w);
}

/* ---- The GSource that runs tickloop ------------------------------------ */

typedef struct {
    GSource source;
    tl_loop *loop;
    gpointer fd_tag; /* from g_source_add_unix_fd */
    struct app *app;
} TickloopSource;

static gboolean tl_source_prepare(GSource *source, gint *timeout_ms) {
    TickloopSource *s = (TickloopSource *)source;
    uint64_t ns = tl_loop_timeout(s->loop);
    if (ns == UINT64_MAX) {
        *timeout_ms = -1;
    } else {
        uint64_t ms = ns / 1000000 + (ns % 1000000 != 0); /* up: never early */
        *timeout_ms = ms > G_MAXINT ? G_MAXINT : (gint)ms;
    }
    return ns == 0; /* ready now: GLib skips the wait */
}

static gboolean tl_source_check(GSource *source) {
    TickloopSource *s = (TickloopSource *)source;
    if (g_source_query_unix_fd(source, s->fd_tag) & G_IO_IN) return TRUE;
    return tl_loop_timeout(s->loop) == 0; /* a timer came due */
}

static gboolean tl_source_dispatch(GSource *source, GSourceFunc callback, gpointer user_data) {
    TickloopSource *s = (TickloopSource *)source;
    (void)callback, (void)user_data;
    s->app->dispatches++;
    int r = tl_loop_run(s->loop, TL_RUN_NOWAIT);
    if (r < 0) fprintf(stderr, "embed_glib: tl_loop_run: %s\n", tl_strerror(r));
    if (r <= 0) {
        /* tickloop has nothing left to do (or failed): end the demo. */
        g_main_loop_quit(s->app->main_loop);
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

static GSourceFuncs tl_source_funcs = {
    .prepare = tl_source_prepare,
    .check = tl_source_check,
    .dispatch = tl_source_dispatch,
};

static GSource *tickloop_source_new(tl_loop *loop, struct app *app) {
    int fd = tl_loop_fd(loop);
    if (fd < 0) {
        fprintf(stderr, "embed_glib: tl_loop_fd: %s\n", tl_strerror(fd));
        return NULL;
    }
    GSource *source = g_source_new(&tl_source_funcs, sizeof(TickloopSource));
    TickloopSource *s = (TickloopSource *)source;
    s->loop = loop;
    s->app = app;
    s->fd_tag = g_source_add_unix_fd(source, fd, G_IO_IN);
    return source;
}

/* ---- GLib's side: the host's own work ---------------------------------- */

static gboolean on_host_readable(gint fd, GIOCondition condition, gpointer data) {
    struct app *a = data;
    (void)condition;
    char buf[64];
    ssize_t got = read(fd, buf, sizeof buf);
    for (ssize_t i = 0; i < got; i++) {
        a->host_reads++;
        if (write(a->to_loop[1], "a", 1) != 1) perror("write");
    }
    return G_SOURCE_CONTINUE;
}

static gboolean on_guard(gpointer data) {
    struct app *a = data;
    a->timed_out = 1;
    g_main_loop_quit(a->main_loop);
    return G_SOURCE_REMOVE;
}

static int run(tl_io_kind io, const char *timers) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = io;
    opts.timers = timers;
    struct app a;
    memset(&a, 0, sizeof a);
    int r = tl_loop_new(&a.loop, &opts);
    if (r < 0) {
        report_loop_new_error("embed_glib", r, timers);
        return 1;
    }
    if (pipe(a.to_host) < 0 || pipe(a.to_loop) < 0) {
        perror("pipe");
        return 1;
    }
    tl_timer_init(&a.tick, on_tick, &a);
    tl_io_init(&a.answers, a.to_loop[0], on_answer, &a);
    if ((r = tl_timer_start(a.loop, &a.tick, kTickNs, kTickNs)) < 0 ||
        (r = tl_io_start(a.loop, &a.answers, TL_READ)) < 0) {
        fprintf(stderr, "embed_glib: start: %s\n", tl_strerror(r));
        return 1;
    }

    a.main_loop = g_main_loop_new(NULL, FALSE);
    GSource *source = tickloop_source_new(a.loop, &a);
    if (!source) return 1;
    g_source_attach(source, NULL);
    guint host_watch = g_unix_fd_add(a.to_host[0], G_IO_IN, on_host_readable, &a);
    guint guard = g_timeout_add(10000, on_guard, &a);
    g_main_loop_run(a.main_loop);

    if (!a.timed_out) g_source_remove(guard);
    g_source_remove(host_watch);
    g_source_destroy(source);
    g_source_unref(source);
    g_main_loop_unref(a.main_loop);

    printf("embed_glib io=%s timers=%s ticks=%d host_reads=%d answers=%d early=%d "
           "dispatches=%d%s\n",
           tl_loop_io_name(a.loop), tl_loop_timers_name(a.loop), a.ticks, a.host_reads,
           a.answers_read, a.early, a.dispatches, a.timed_out ? " TIMED OUT" : "");
    tl_timer_stop(a.loop, &a.tick); /* only after a timeout are they still active */
    tl_io_stop(a.loop, &a.answers);
    for (int i = 0; i < 2; i++) close(a.to_host[i]), close(a.to_loop[i]);
    if (tl_loop_free(a.loop) < 0) return 1;
    return a.ticks == kTicks && a.host_reads == kTicks && a.answers_read == kTicks && !a.early &&
                   !a.timed_out
               ? 0
               : 1;
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--io epoll|io_uring|auto] [--timers NAME] [--help]\n"
            "Runs a tickloop loop inside GLib's main loop through a GSource: %d timer ticks\n"
            "cross to a GLib fd watch over a pipe and come back as I/O (tickloop %s).\n",
            argv0, kTicks, tl_version());
}

int main(int argc, char **argv) {
    tl_io_kind io = TL_IO_AUTO;
    const char *timers = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1]; /* argv[argc] is NULL */
        if (strcmp(opt, "--help") == 0) {
            usage(stdout, argv[0]);
            return 0;
        } else if (val && strcmp(opt, "--io") == 0 && parse_io_kind(val, &io) == 0) {
            /* parse_io_kind stored the backend */
        } else if (val && strcmp(opt, "--timers") == 0) {
            timers = val;
        } else {
            usage(stderr, argv[0]);
            return 2;
        }
    }
    return run(io, timers);
}
