/* SPDX-License-Identifier: MIT */
/*
 * embed_poll.c: tickloop running inside another program's poll() loop.
 *
 * The host owns the main loop and its own descriptors; tickloop contributes
 * one descriptor (tl_loop_fd) and one timeout (tl_loop_timeout), and the host
 * calls tl_loop_run(TL_RUN_NOWAIT) whenever poll() returns. Nothing blocks
 * inside tickloop. The same three calls embed it in GLib (embed_glib.c), Qt,
 * or any loop that can watch an fd with a timeout.
 *
 * What it does, so that timers and I/O both cross the boundary: a tickloop
 * timer ticks every 20 ms and writes to a pipe the *host* watches; the host
 * answers each tick on a second pipe that a tickloop I/O watcher reads. After
 * 10 ticks tickloop stops its handles, tl_loop_alive() turns 0 and the host
 * loop ends. Exit status 0 if every tick arrived (never early) and was
 * answered.
 *
 *   embed_poll [--io epoll|io_uring|auto] [--timers NAME] [--help]
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <poll.h>
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
    tl_timer tick;
    tl_io answers;  /* tickloop's end of the host -> tickloop pipe */
    int to_host[2]; /* tickloop writes, the host reads  */
    int to_loop[2]; /* the host writes, tickloop reads  */
    int ticks, answers_read, host_reads, early;
};

static void on_tick(tl_loop *loop, tl_timer *t) {
    struct app *a = t->data;
    /* A repeating timer is re-armed before its callback: the deadline that
       fired is one period before the current one. */
    if (tl_now(loop) < t->deadline - t->repeat) a->early++;
    if (write(a->to_host[1], "t", 1) != 1) perror("write");
    if (++a->ticks == kTicks) tl_timer_stop(loop, t);
}

static void on_answer(tl_loop *loop, tl_io *w, unsigned revents) {
    struct app *a = w->data;
    char buf[64];
    ssize_t n = (revents & TL_READ) ? read(w->fd, buf, sizeof buf) : 0;
    if (n > 0) a->answers_read += (int)n;
    /* Every tick answered: nothing is left to keep the loop alive. */
    if (a->answers_read >= kTicks) tl_io_stop(loop, w);
}

/* tl_loop_timeout's ns as poll()'s ms, rounded *up*: rounding down would wake
 * the host before the timer, for an empty round (and, below 1 ms, a spin). */
static int poll_ms(uint64_t ns) {
    if (ns == UINT64_MAX) return -1;
    uint64_t ms = ns / 1000000 + (ns % 1000000 != 0);
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The host's loop: its own pipe and tickloop's fd in one poll() set. */
static int host_loop(tl_loop *loop, struct app *a, int *rounds) {
    int loop_fd = tl_loop_fd(loop);
    if (loop_fd < 0) {
        fprintf(stderr, "embed_poll: tl_loop_fd: %s\n", tl_strerror(loop_fd));
        return -1;
    }
    while (tl_loop_alive(loop)) {
        struct pollfd fds[2] = {{.fd = a->to_host[0], .events = POLLIN},
                                {.fd = loop_fd, .events = POLLIN}};
        int n = poll(fds, 2, poll_ms(tl_loop_timeout(loop)));
        if (n < 0 && errno != EINTR) {
            perror("poll");
            return -1;
        }
        ++*rounds;
        if (n > 0 && (fds[0].revents & POLLIN)) {
            /* The host's own work: answer each tick. */
            char buf[64];
            ssize_t got = read(a->to_host[0], buf, sizeof buf);
            for (ssize_t i = 0; i < got; i++) {
                a->host_reads++;
                if (write(a->to_loop[1], "a", 1) != 1) perror("write");
            }
        }
        /* Whether tickloop's fd fired or its timeout ran out: one iteration
           that never blocks (running it needlessly costs one empty round). */
        int r = tl_loop_run(loop, TL_RUN_NOWAIT);
        if (r < 0) {
            fprintf(stderr, "embed_poll: tl_loop_run: %s\n", tl_strerror(r));
            return -1;
        }
    }
    return 0;
}

static int run(tl_io_kind io, const char *timers) {
    tl_loop_options opts;
    tl_loop_options_init(&opts);
    opts.io = io;
    opts.timers = timers;
    tl_loop *loop;
    int r = tl_loop_new(&loop, &opts);
    if (r < 0) {
        report_loop_new_error("embed_poll", r, timers);
        return 1;
    }
    struct app a;
    memset(&a, 0, sizeof a);
    if (pipe(a.to_host) < 0 || pipe(a.to_loop) < 0) {
        perror("pipe");
        return 1;
    }
    tl_timer_init(&a.tick, on_tick, &a);
    tl_io_init(&a.answers, a.to_loop[0], on_answer, &a);
    if ((r = tl_timer_start(loop, &a.tick, kTickNs, kTickNs)) < 0 ||
        (r = tl_io_start(loop, &a.answers, TL_READ)) < 0) {
        fprintf(stderr, "embed_poll: start: %s\n", tl_strerror(r));
        return 1;
    }
    int rounds = 0;
    r = host_loop(loop, &a, &rounds);
    printf("embed_poll io=%s timers=%s ticks=%d host_reads=%d answers=%d early=%d rounds=%d\n",
           tl_loop_io_name(loop), tl_loop_timers_name(loop), a.ticks, a.host_reads, a.answers_read,
           a.early, rounds);
    for (int i = 0; i < 2; i++) close(a.to_host[i]), close(a.to_loop[i]);
    if (tl_loop_free(loop) < 0 || r < 0) return 1;
    return a.ticks == kTicks && a.host_reads == kTicks && a.answers_read == kTicks && !a.early ? 0
                                                                                               : 1;
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--io epoll|io_uring|auto] [--timers NAME] [--help]\n"
            "Drives a tickloop loop from a plain poll() host loop: %d timer ticks cross to the\n"
            "host over a pipe and come back as I/O (tickloop %s).\n",
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
            static const char *const known[] = {"--io", "--timers"};
            report_bad_option(argv[0], opt, val, known, sizeof known / sizeof known[0]);
            usage(stderr, argv[0]);
            return 2;
        }
    }
    return run(io, timers);
}
