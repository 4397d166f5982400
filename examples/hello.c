/* SPDX-License-Identifier: MIT */
/*
 * hello.c: the smallest tickloop program in plain C11.
 *
 * Shows a repeating timer, an fd watcher (a pipe this program writes to from
 * a timer) and a signal watcher (SIGINT stops the program early: exit 130,
 * the shell's convention). Runs for about half a second on every registered
 * timer backend (or the one given with --timers or TICKLOOP_TIMERS),
 * printing what fired.
 *
 *   hello [--io epoll|io_uring|auto] [--timers NAME] [--help]
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tickloop/tickloop.h>
#include <tickloop/timer_backend.h>

#include "example_options.h"
#include "loop_new_error.h"

struct demo {
    tl_timer tick;  /* repeating: writes to the pipe          */
    tl_timer done;  /* one-shot: stops everything              */
    tl_io reader;   /* the read end of the pipe                */
    tl_signal intr; /* SIGINT: stop early                      */
    int pipe_fds[2];
    int ticks, reads;
};

/* Set by the SIGINT watcher: no further backend runs. */
static int interrupted;

static void stop_all(tl_loop *loop, struct demo *d) {
    tl_timer_stop(loop, &d->tick);
    tl_timer_stop(loop, &d->done);
    tl_io_stop(loop, &d->reader);
    tl_signal_stop(loop, &d->intr);
}

static void on_tick(tl_loop *loop, tl_timer *t) {
    struct demo *d = t->data;
    (void)loop;
    d->ticks++;
    if (write(d->pipe_fds[1], "x", 1) != 1) perror("write");
}

static void on_readable(tl_loop *loop, tl_io *w, unsigned revents) {
    struct demo *d = w->data;
    char buf[64];
    (void)loop;
    if (revents & TL_READ && read(w->fd, buf, sizeof buf) > 0) d->reads++;
}

static void on_done(tl_loop *loop, tl_timer *t) {
    stop_all(loop, t->data);
}

static void on_sigint(tl_loop *loop, tl_signal *s, int signo) {
    (void)signo;
    interrupted = 1;
    stop_all(loop, s->data);
}

/* Runs the demo on backend `name` (NULL: TICKLOOP_TIMERS, else the library's
   default). Returns 0, 1 on a failure, 2 if the loop could not be created. */
static int run_backend(tl_io_kind io, const char *name) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = io;
    opts.timers = name;
    tl_loop *loop;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        report_loop_new_error("hello", r, name);
        return 2;
    }
    struct demo d;
    memset(&d, 0, sizeof d);
    if (pipe(d.pipe_fds) < 0) {
        perror("pipe");
        tl_loop_free(loop);
        return 1;
    }
    tl_timer_init(&d.tick, on_tick, &d);
    tl_timer_init(&d.done, on_done, &d);
    tl_io_init(&d.reader, d.pipe_fds[0], on_readable, &d);
    if ((r = tl_timer_start(loop, &d.tick, 10000000, 50000000)) < 0 || /* 10 ms, then every 50 */
        (r = tl_timer_start(loop, &d.done, 500000000, 0)) < 0 ||       /* 0.5 s                 */
        (r = tl_io_start(loop, &d.reader, TL_READ)) < 0 ||
        (r = tl_signal_start(loop, &d.intr, SIGINT, on_sigint, &d)) < 0) {
        fprintf(stderr, "hello: %s: start: %s\n", tl_loop_timers_name(loop), tl_strerror(r));
        stop_all(loop, &d);
        close(d.pipe_fds[0]);
        close(d.pipe_fds[1]);
        tl_loop_free(loop);
        return 1;
    }
    r = tl_loop_run(loop, TL_RUN_DEFAULT);
    tl_loop_stats st;
    tl_loop_stats_get(loop, &st);
    printf("%-8s io=%-6s ticks=%d reads=%d iterations=%llu timers_fired=%llu run=%d\n",
           tl_loop_timers_name(loop), tl_loop_io_name(loop), d.ticks, d.reads,
           (unsigned long long)st.iterations, (unsigned long long)st.timers_fired, r);
    fflush(stdout); /* one line per backend as it ends, also into a pipe */
    close(d.pipe_fds[0]);
    close(d.pipe_fds[1]);
    if (tl_loop_free(loop) != 0) return 1;
    /* An interrupted run stopped early: its counts say nothing. */
    return interrupted || (d.ticks >= 9 && d.reads >= 1) ? 0 : 1;
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--io epoll|io_uring|auto] [--timers NAME] [--help]\n"
            "Runs a timer, a pipe watcher and a SIGINT watcher for 0.5 s on every registered\n"
            "timer backend, or on the one named by --timers or TICKLOOP_TIMERS (tickloop %s).\n"
            "Ctrl-C stops the program (exit status 130).\n",
            argv0, tl_version());
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
            timers = val; /* an unknown name: loop_new_error.h says so */
        } else {
            static const char *const known[] = {"--io", "--timers"};
            report_bad_option(argv[0], opt, val, known, sizeof known / sizeof known[0]);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    /* SIGINT stays blocked from here on, so that one arriving between two
       backends' loops (when no loop watches it) waits for the next loop
       instead of killing the program. */
    sigset_t intr;
    sigemptyset(&intr);
    sigaddset(&intr, SIGINT);
    sigprocmask(SIG_BLOCK, &intr, NULL);
    int failed = 0;
    const char *env = getenv("TICKLOOP_TIMERS");
    if (timers || (env && *env)) {
        /* One backend: --timers, else the environment's (the library reads
           it, and says so if it names no backend). */
        failed = run_backend(io, timers) != 0;
    } else {
        const char *names[16];
        size_t n = tl_timer_backend_names(names, 16);
        for (size_t i = 0; i < n && i < 16 && !interrupted; i++) {
            int r = run_backend(io, names[i]);
            failed |= r != 0;
            if (r == 2) break; /* the I/O backend itself failed: so would the rest */
        }
    }
    if (interrupted) {
        printf("hello: interrupted by SIGINT\n");
        return 128 + SIGINT; /* the shell's convention for a program ended by SIGINT */
    }
    return failed;
}
