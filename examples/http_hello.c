/* SPDX-License-Identifier: MIT */
/*
 * http_hello.c: a keep-alive HTTP/1.1 server answering GET / with "Hello, World!".
 *
 * Shows how a real server uses tickloop:
 * - streams and listeners: the loop accepts, reads and writes (on io_uring a
 *   multishot accept, a multishot receive per connection into the loop's
 *   buffer ring and sends as submissions, all in one io_uring_enter per
 *   iteration; on epoll readiness plus recv()/send() done by the loop);
 * - one loop per worker thread, each with its own SO_REUSEPORT listener, so the
 *   kernel spreads connections over the threads and no state is shared; the
 *   port is shared only between this process's threads: a port another
 *   process listens on is refused unless --reuseport asks to share it;
 * - a per-connection idle timer restarted on every request: the heartbeat
 *   pattern, tl_timer_start() on an active timer reschedules it (O(1) on the
 *   wheels, O(log n) on the heaps) with no allocation;
 * - a second timer bounding how long one request's header may take to arrive,
 *   so a slow client (slowloris) cannot hold a connection with a trickle;
 * - pipelined requests answered in order with one write per batch, and
 *   back-pressure: while a batch is being written no new request is answered,
 *   and reading stops once a request header's worth of input is waiting, so a
 *   client that does not read its responses is not read from either;
 * - EMFILE on accept without spinning: the loop pauses accepting by itself,
 *   and a reserved descriptor is given up to accept and close one pending
 *   connection each time, so that clients see a close instead of hanging;
 * - signals handled by the main thread's loop (tl_signal), which stops the
 *   workers with tl_async; every handle is stopped and every loop freed, the
 *   statistics are printed (with each loop's timer lateness from
 *   tl_loop_lateness), and the process exits 0.
 *
 *   http_hello [--port N] [--bind ADDR] [--threads N] [--idle-ms N]
 *              [--header-ms N] [--io epoll|io_uring|auto] [--timers NAME]
 *              [--reuseport] [--help]
 *
 * Once every worker is ready it prints "listening on ADDR:PORT ..." on stdout
 * (--port 0 lets the kernel pick a free port). Try:
 *   curl -v http://127.0.0.1:8080/          wrk -t2 -c256 -d3s http://127.0.0.1:8080/
 *
 * This file runs the workers and the main thread; http_conn.c serves the
 * connections. The tl_*_stop() calls are not checked: they fail only on
 * misuse (a NULL handle, or one active on another loop), which this example
 * never does.
 */
#define _GNU_SOURCE /* accept4, SO_REUSEPORT */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tickloop/tickloop.h>

#include "http_hello.h"
#include "loop_new_error.h"

/* ------------------------------------------------------------------------ */
/* Workers                                                                  */
/* ------------------------------------------------------------------------ */

/* Stops every handle of the worker and closes every connection; once the
 * close callbacks have run, the loop has nothing left and tl_loop_run
 * returns. */
static void worker_close_all(struct worker *w) {
    tl_listener_stop(w->loop, &w->listener);
    tl_async_stop(w->loop, &w->stop);
    while (w->conns) conn_close(w->conns);
}

static void worker_on_stop(tl_loop *loop, tl_async *a) {
    (void)loop;
    worker_close_all(a->data);
}

static int worker_setup(struct worker *w) {
    int r = tl_loop_new(&w->loop, &w->server->cfg.loop_options);
    if (r < 0) {
        w->loop = NULL;
        report_loop_new_error("http_hello", r, w->server->cfg.loop_options.timers);
        return r;
    }
    if ((r = tl_async_start(w->loop, &w->stop, worker_on_stop, w)) < 0 ||
        (r = tl_listener_start(w->loop, &w->listener, w->listen_fd, on_accept, w)) < 0) {
        fprintf(stderr, "http_hello: worker setup: %s\n", tl_strerror(r));
        return r;
    }
    return 0;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    struct server *s = w->server;
    w->setup_err = worker_setup(w);
    pthread_barrier_wait(&s->ready);
    if (w->setup_err == 0) {
        int r = tl_loop_run(w->loop, TL_RUN_DEFAULT);
        if (r < 0) {
            /* The kernel's wait failed: nothing sensible is left to do, and
             * tearing down here would race with the main thread's stop send. */
            fprintf(stderr, "http_hello: tl_loop_run: %s\n", tl_strerror(r));
            exit(1);
        }
    }
    if (w->loop) {
        /* After a failed setup: whatever was started. Then the close
         * callbacks of the connections, if any are still due. */
        worker_close_all(w);
        tl_loop_run(w->loop, TL_RUN_DEFAULT);
        tl_loop_stats_get(w->loop, &w->stats);
        tl_loop_lateness(w->loop, &w->lateness, 0);
        int r = tl_loop_free(w->loop);
        if (r < 0) {
            fprintf(stderr, "http_hello: tl_loop_free: %s\n", tl_strerror(r));
            w->exit_err = r; /* reported as a failure by the main thread */
        }
        w->loop = NULL;
    }
    /* The last thing this thread does: the main loop joins it once every
     * worker got here, so the send below has returned before worker_exit is
     * stopped. */
    atomic_fetch_add(&s->finished, 1);
    tl_async_send(&s->worker_exit);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Main thread                                                              */
/* ------------------------------------------------------------------------ */

static void server_request_stop(struct server *s) {
    if (s->stopping) return;
    s->stopping = 1;
    for (int i = 0; i < s->started; i++)
        if (s->workers[i].setup_err == 0) tl_async_send(&s->workers[i].stop);
}

static void on_signal(tl_loop *loop, tl_signal *sig, int signo) {
    (void)loop;
    printf("http_hello: %s, stopping\n", signo == SIGINT ? "SIGINT" : "SIGTERM");
    server_request_stop(sig->data);
}

static void on_worker_exit(tl_loop *loop, tl_async *a) {
    struct server *s = a->data;
    /* A worker finishes only when told to (or when its setup failed, which
     * the main thread has seen), so this waits for the last one. */
    if (atomic_load(&s->finished) < s->started) return;
    /* Every worker has reached its final tl_async_send; joining waits for
     * those calls to return, which takes microseconds. */
    for (int i = 0; i < s->started; i++) pthread_join(s->workers[i].thread, NULL);
    s->started = 0;
    tl_async_stop(loop, &s->worker_exit);
    tl_signal_stop(loop, &s->sigint);
    tl_signal_stop(loop, &s->sigterm);
}

/* A socket of cfg's family bound to cfg's address and *port, with
 * SO_REUSEADDR, SO_REUSEPORT if reuseport, IPv6 only for an IPv6 address;
 * listening if listening. *port becomes the bound port. Returns the fd or a
 * negative errno. */
static int bound_socket(const struct config *cfg, int *port, int reuseport, int listening) {
    struct sockaddr_storage sa = cfg->addr;
    int family = sa.ss_family;
    socklen_t len;
    if (family == AF_INET6) {
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)*port);
        len = sizeof(struct sockaddr_in6);
    } else {
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)*port);
        len = sizeof(struct sockaddr_in);
    }
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    /* An IPv6 address means IPv6 only (:: does not also take IPv4). */
    if ((family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
        bind(fd, (struct sockaddr *)&sa, len) < 0 || (listening && listen(fd, 1024) < 0) ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                     : ((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

/* Opens a non-blocking listening socket; every worker gets its own one on the
 * same port (SO_REUSEPORT) and the kernel balances connections between them. */
static int listen_socket(const struct config *cfg, int *port) {
    return bound_socket(cfg, port, 1, 1);
}

/* SO_REUSEPORT lets any socket that sets it join a port, so a second server
 * started on a port that is in use would silently take part of its
 * connections. Unless --reuseport asks for that, this probe, bound without
 * SO_REUSEPORT, claims the port first: its bind fails with EADDRINUSE while
 * any other socket listens there. It also picks the port for --port 0, and
 * stays bound until the workers listen (it does not listen itself, so they
 * can join it). Returns the fd or a negative errno. */
static int port_probe(const struct config *cfg, int *port) {
    return bound_socket(cfg, port, 0, 0);
}

/* Parses an IPv4 or IPv6 address (e.g. 127.0.0.1, ::1, ::) into *out. */
static int parse_addr(const char *s, struct sockaddr_storage *out) {
    memset(out, 0, sizeof *out);
    struct sockaddr_in *in4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, s, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        return 0;
    }
    return -1;
}

static void usage(FILE *out, const char *argv0) {
    fprintf(out,
            "usage: %s [--port N] [--bind ADDR] [--threads N] [--idle-ms N] [--header-ms N]\n"
            "          [--io epoll|io_uring|auto] [--timers NAME] [--reuseport] [--help]\n"
            "A keep-alive HTTP/1.1 server answering GET / (tickloop %s).\n"
            "  --port N       TCP port, 0 picks a free one (default 8080)\n"
            "  --bind ADDR    IPv4 or IPv6 address to listen on (default 127.0.0.1;\n"
            "                 ::1 or :: for IPv6)\n"
            "  --threads N    worker threads, one loop each (default: online CPUs)\n"
            "  --idle-ms N    close a connection with no request for N ms (default 5000)\n"
            "  --header-ms N  close a connection whose request header takes longer\n"
            "                 than N ms to arrive (default 2000)\n"
            "  --io KIND      I/O backend (default auto)\n"
            "  --timers NAME  timer backend: heap2, heap4, wheel, hwheel, ... (default:\n"
            "                 TICKLOOP_TIMERS, else the library's)\n"
            "  --reuseport    share the port with other processes listening on it with\n"
            "                 SO_REUSEPORT (by default a port in use is refused)\n",
            argv0, tl_version());
}

static int parse_number(const char *s, unsigned long long min, unsigned long long max,
                        unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

/* Fills cfg from the command line; returns -1 on an unknown option or a bad value. */
static int parse_args(int argc, char **argv, struct config *cfg) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->port = 8080;
    cfg->threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
    cfg->idle_ns = 5000 * MS;
    cfg->header_ns = 2000 * MS;
    parse_addr("127.0.0.1", &cfg->addr);
    tl_loop_options_init(&cfg->loop_options);
    cfg->loop_options.read_buffer_size = READ_BUF;
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1]; /* argv[argc] is NULL */
        unsigned long long v;
        if (strcmp(opt, "--help") == 0) {
            usage(stdout, argv[0]);
            exit(0);
        }
        if (strcmp(opt, "--reuseport") == 0) { /* the one option without a value */
            cfg->reuseport = 1;
            i--;
            continue;
        }
        static const char *const known[] = {"--port", "--threads", "--idle-ms", "--header-ms",
                                            "--bind", "--io",      "--timers"};
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strcmp(opt, known[k]) == 0) is_known = 1;
        if (!is_known) {
            fprintf(stderr, "%s: unknown option: %s\n", argv[0], opt);
            return -1;
        }
        if (!val) {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], opt);
            return -1;
        }
        if (strcmp(opt, "--port") == 0 && parse_number(val, 0, 65535, &v) == 0) {
            cfg->port = (int)v;
        } else if (strcmp(opt, "--threads") == 0 && parse_number(val, 1, MAX_THREADS, &v) == 0) {
            cfg->threads = (int)v;
        } else if (strcmp(opt, "--idle-ms") == 0 && parse_number(val, 1, UINT32_MAX, &v) == 0) {
            cfg->idle_ns = v * MS;
        } else if (strcmp(opt, "--header-ms") == 0 && parse_number(val, 1, UINT32_MAX, &v) == 0) {
            cfg->header_ns = v * MS;
        } else if (strcmp(opt, "--bind") == 0 && parse_addr(val, &cfg->addr) == 0) {
            /* stored by parse_addr */
        } else if (strcmp(opt, "--io") == 0 && strcmp(val, "epoll") == 0) {
            cfg->loop_options.io = TL_IO_EPOLL;
        } else if (strcmp(opt, "--io") == 0 && strcmp(val, "io_uring") == 0) {
            cfg->loop_options.io = TL_IO_URING;
        } else if (strcmp(opt, "--io") == 0 && strcmp(val, "auto") == 0) {
            cfg->loop_options.io = TL_IO_AUTO;
        } else if (strcmp(opt, "--timers") == 0) {
            cfg->loop_options.timers = val; /* an unknown name: loop_new_error.h says so */
        } else {
            fprintf(stderr, "%s: bad value for %s: %s\n", argv[0], opt, val);
            return -1;
        }
    }
    return 0;
}

/* The main thread's loop: SIGINT and SIGTERM, and the workers' exits. */
static int main_loop_setup(struct server *s) {
    int r = tl_loop_new(&s->loop, &s->cfg.loop_options);
    if (r < 0) {
        report_loop_new_error("http_hello", r, s->cfg.loop_options.timers);
        return r;
    }
    if ((r = tl_signal_start(s->loop, &s->sigint, SIGINT, on_signal, s)) < 0 ||
        (r = tl_signal_start(s->loop, &s->sigterm, SIGTERM, on_signal, s)) < 0 ||
        (r = tl_async_start(s->loop, &s->worker_exit, on_worker_exit, s)) < 0) {
        fprintf(stderr, "http_hello: main loop setup: %s\n", tl_strerror(r));
        return r;
    }
    return 0;
}

/* The workers and their listening sockets, all on one port (*port: the
 * configured one, or the kernel's choice for 0). Returns 0 or -1. */
static int open_listeners(struct server *s, int *port) {
    s->workers = calloc((size_t)s->cfg.threads, sizeof *s->workers);
    if (!s->workers) return -1;
    int probe = -1;
    if (!s->cfg.reuseport && (probe = port_probe(&s->cfg, port)) < 0) {
        if (probe == -EADDRINUSE)
            fprintf(stderr,
                    "http_hello: port %d is already in use (another server listens on it); "
                    "choose another --port, or pass --reuseport to share it with processes "
                    "that listen with SO_REUSEPORT\n",
                    *port);
        else
            fprintf(stderr, "http_hello: port %d: %s\n", *port, strerror(-probe));
        return -1;
    }
    for (int i = 0; i < s->cfg.threads; i++) {
        struct worker *w = &s->workers[i];
        w->index = i;
        w->server = s;
        w->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        /* The first socket may let the kernel choose the port; the others
         * then join that one. */
        w->listen_fd = listen_socket(&s->cfg, port);
        if (w->listen_fd < 0) {
            fprintf(stderr, "http_hello: listen on port %d: %s\n", *port, strerror(-w->listen_fd));
            return -1;
        }
    }
    if (probe >= 0) close(probe); /* the workers listen: the port is taken */
    return 0;
}

/* Starts the worker threads and waits until each has set up its loop (or
 * failed to: then s->exit_code is 1). Returns 0, or -1 if a thread could
 * not be created. */
static int start_workers(struct server *s) {
    pthread_barrier_init(&s->ready, NULL, (unsigned)s->cfg.threads + 1);
    for (int i = 0; i < s->cfg.threads; i++) {
        int r = pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]);
        if (r != 0) {
            fprintf(stderr, "http_hello: pthread_create: %s\n", strerror(r));
            return -1;
        }
        s->started++;
    }
    pthread_barrier_wait(&s->ready);
    for (int i = 0; i < s->started; i++) {
        if (s->workers[i].setup_err < 0) s->exit_code = 1;
    }
    return 0;
}

/* The line the tests and scripts wait for: every worker is ready. */
static void print_listening(const struct server *s, int port) {
    char addr[INET6_ADDRSTRLEN + 2];
    if (s->cfg.addr.ss_family == AF_INET6) {
        addr[0] = '[';
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&s->cfg.addr)->sin6_addr, addr + 1,
                  INET6_ADDRSTRLEN);
        strcat(addr, "]");
    } else {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&s->cfg.addr)->sin_addr, addr,
                  sizeof addr);
    }
    printf("listening on %s:%d threads=%d io=%s timers=%s idle-ms=%llu header-ms=%llu "
           "streams=%s\n",
           addr, port, s->cfg.threads, tl_loop_io_name(s->loop), tl_loop_timers_name(s->loop),
           (unsigned long long)(s->cfg.idle_ns / MS), (unsigned long long)(s->cfg.header_ns / MS),
           tl_loop_stream_path(s->loop));
    fflush(stdout);
}

/* Each worker's counters and its loop's statistics and timer lateness, then
 * the totals; closes the workers' sockets. */
static void print_stats(struct server *s) {
    uint64_t connections = 0, requests = 0;
    for (int i = 0; i < s->cfg.threads; i++) {
        struct worker *w = &s->workers[i];
        printf("worker %d: connections %llu (idle-closed %llu, header-timeout %llu, shed %llu, "
               "accept pauses %llu) requests %llu | loop: iterations %llu, empty wakeups %llu, "
               "timers fired %llu, io events %llu, stream reads %llu, writes %llu, buffer ring "
               "exhausted %llu\n",
               i, (unsigned long long)w->accepted, (unsigned long long)w->idle_closed,
               (unsigned long long)w->header_closed, (unsigned long long)w->shed,
               (unsigned long long)w->accept_pauses, (unsigned long long)w->requests,
               (unsigned long long)w->stats.iterations, (unsigned long long)w->stats.empty_wakeups,
               (unsigned long long)w->stats.timers_fired, (unsigned long long)w->stats.io_events,
               (unsigned long long)w->stats.stream_reads,
               (unsigned long long)w->stats.stream_writes,
               (unsigned long long)w->stats.buffer_ring_exhausted);
        /* The loop's own view of its timers: wake-up time minus deadline. */
        printf("worker %d: timer lateness (us, as the loop saw it): %llu fired, p50 %.1f, p90 "
               "%.1f, p99 %.1f, p99.9 %.1f, max %.1f; timer wake-ups %llu (up to %llu timers "
               "each)\n",
               i, (unsigned long long)w->lateness.count, w->lateness.p50_ns / 1e3,
               w->lateness.p90_ns / 1e3, w->lateness.p99_ns / 1e3, w->lateness.p999_ns / 1e3,
               w->lateness.max_ns / 1e3, (unsigned long long)w->stats.timer_wakeups,
               (unsigned long long)w->stats.max_timers_per_wakeup);
        connections += w->accepted;
        requests += w->requests;
        if (w->setup_err < 0 || w->exit_err < 0) s->exit_code = 1;
        close(w->listen_fd);
        if (w->spare_fd >= 0) close(w->spare_fd);
    }
    printf("total: connections %llu, requests %llu\n", (unsigned long long)connections,
           (unsigned long long)requests);
}

int main(int argc, char **argv) {
    struct server s;
    memset(&s, 0, sizeof s);
    if (parse_args(argc, argv, &s.cfg) < 0) {
        usage(stderr, argv[0]);
        return 2;
    }

    /* Blocked here, before any thread exists, SIGINT and SIGTERM stay blocked
     * in every worker (threads inherit the mask), so only the main loop's
     * signalfd receives them. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);

    if (main_loop_setup(&s) < 0) return 1;
    int port = s.cfg.port;
    if (open_listeners(&s, &port) < 0 || start_workers(&s) < 0) return 1;
    if (s.exit_code)
        server_request_stop(&s);
    else
        print_listening(&s, port);

    /* Runs until every worker has finished and been joined. */
    int r = tl_loop_run(s.loop, TL_RUN_DEFAULT);
    if (r < 0) {
        fprintf(stderr, "http_hello: tl_loop_run: %s\n", tl_strerror(r));
        return 1;
    }
    print_stats(&s);
    if ((r = tl_loop_free(s.loop)) < 0) {
        fprintf(stderr, "http_hello: tl_loop_free: %s\n", tl_strerror(r));
        s.exit_code = 1;
    }
    pthread_barrier_destroy(&s.ready);
    free(s.workers);
    return s.exit_code;
}
