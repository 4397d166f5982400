/* SPDX-License-Identifier: MIT */
/*
 * http_hello.h: what the two halves of the http_hello example share: the
 * sizes, the configuration, a connection, a worker (one thread, one loop)
 * and the server; http_conn.c serves connections, http_hello.c runs the
 * workers and the main thread.
 */
#ifndef TICKLOOP_EXAMPLES_HTTP_HELLO_H
#define TICKLOOP_EXAMPLES_HTTP_HELLO_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <tickloop/tickloop.h>

#define MS ((uint64_t)1000000)

enum {
    /* A request header larger than this is answered with 431 and the
     * connection closed, as most servers do (nginx's default is 1 KiB + 8 KiB). */
    IN_CAP = 4096,
    /* The loop's read buffers (tl_loop_options.read_buffer_size): one read
     * callback gets at most this much. The input buffer has room for IN_CAP
     * plus one of them and reading goes on while less than IN_CAP is
     * waiting, so what a callback is given always fits. */
    READ_BUF = 4096,
    /* Room for the responses of a batch of pipelined requests; requests are
     * parsed only while a whole response still fits. */
    OUT_CAP = 16384,
    RESPONSE_MAX = 256,
    MAX_THREADS = 256,
};

struct config {
    struct sockaddr_storage addr; /* IPv4 or IPv6, port unset */
    int port;
    int threads;
    uint64_t idle_ns;
    uint64_t header_ns;
    int reuseport; /* share the port with other processes (--reuseport) */
    tl_loop_options loop_options;
};

struct worker;

struct conn {
    tl_stream stream;
    tl_write_req write;
    struct iovec iov; /* the queued write's, unchanged until its callback */
    tl_timer idle;    /* closes a connection with no request for idle_ns       */
    tl_timer header;  /* closes a connection whose request header is too slow */
    struct worker *worker;
    struct conn *prev, *next;
    int reading;           /* tl_stream_read_start is in effect */
    int writing;           /* out[out_off, out_len) is queued: left alone until written */
    int closing;           /* tl_stream_close called; freed in its callback */
    int peer_closed;       /* read EOF: answer what was received, then close */
    int close_after_write; /* "Connection: close", HTTP/1.0 or a bad request */
    int keep_alive_10;     /* this request is HTTP/1.0 with "Connection: keep-alive" */
    size_t in_len;
    size_t out_off, out_len;
    char in[IN_CAP + READ_BUF];
    char out[OUT_CAP];
};

struct server;

struct worker {
    int index;
    pthread_t thread;
    struct server *server;
    int listen_fd;
    int spare_fd; /* reserved for the EMFILE trick; -1 while given up */
    tl_loop *loop;
    tl_listener listener;
    tl_async stop;
    struct conn *conns;
    int setup_err; /* 0, or the negative errno that made setup fail */
    int exit_err;  /* 0, or the negative errno of the final tl_loop_free */
    /* Counters, read by the main thread after the worker has finished. */
    uint64_t accepted, requests, idle_closed, header_closed, shed, accept_pauses;
    tl_loop_stats stats;
    tl_lateness lateness; /* how late the loop ran the idle/header timers */
};

struct server {
    struct config cfg;
    tl_loop *loop; /* the main thread's: signals and worker exits */
    tl_signal sigint, sigterm;
    tl_async worker_exit;
    pthread_barrier_t ready;
    struct worker *workers;
    int started; /* threads created */
    atomic_int finished;
    int stopping;
    int exit_code;
};

/* http_conn.c: the listener's accept callback (fd >= 0: a new connection;
 * else the loop paused accepting, -EMFILE/-ENFILE sheds one), and closing a
 * connection (its memory is freed once the loop has closed its stream). */
void on_accept(tl_loop *loop, tl_listener *l, int fd);
void conn_close(struct conn *c);

#endif /* TICKLOOP_EXAMPLES_HTTP_HELLO_H */
