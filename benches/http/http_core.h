/* SPDX-License-Identifier: MIT */
/*
 * http_core.h: the request handling shared by every server of the HTTP
 * throughput benchmark (benches/http/), so that only the event loop differs.
 *
 * A connection owns an input and an output buffer. The loop adapter moves
 * bytes: readiness-based adapters (tickloop, libev, uv_poll_t) call
 * hb_read() and hb_flush(); a completion-based one (uv_read_start) appends
 * what it was given to `in` and writes `out` itself. hb_process() turns
 * complete requests into responses: keep-alive GET, a fixed 14-byte body,
 * "Connection: close" and HTTP/1.0 without keep-alive honoured, pipelining
 * answered in order. That is the per-request work of a minimal server (the
 * parsing libev's and libuv's own HTTP examples do), deliberately smaller
 * than examples/http_hello.c, so the loop's share of the time is visible.
 */
#ifndef TL_BENCH_HTTP_CORE_H
#define TL_BENCH_HTTP_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { HB_IN_CAP = 4096, HB_OUT_CAP = 16384 };

/* The idle timeout every server restarts on each request (a heartbeat). */
#define HB_IDLE_MS 5000

struct hb_conn {
    int fd;
    int peer_closed; /* EOF read: answer what is buffered, then close */
    int close_after; /* the last response announced "Connection: close" */
    size_t in_len;
    size_t out_off, out_len;
    char in[HB_IN_CAP];
    char out[HB_OUT_CAP];
};

/* Outcome of an I/O helper: keep going, or close the connection now. */
enum { HB_OK = 0, HB_CLOSE = -1 };

void hb_conn_init(struct hb_conn *c, int fd);

/* Answers every complete request in `in` while a response fits in `out`.
 * Returns how many requests were answered (the adapter restarts its idle
 * timer when this is non-zero). */
int hb_process(struct hb_conn *c);

/* Reads what the socket has into `in` (non-blocking fd). HB_CLOSE on error. */
int hb_read(struct hb_conn *c);

/* Writes what it can of `out`. HB_CLOSE when the connection is finished
 * (error, or everything written and close_after/peer_closed set). */
int hb_flush(struct hb_conn *c);

/* 1 while output is pending (watch for writable). */
int hb_want_write(const struct hb_conn *c);

/* 1 while another request may be read (not at EOF, room in both buffers). */
int hb_want_read(const struct hb_conn *c);

/* A listening TCP socket on 127.0.0.1:port (0 = any), non-blocking,
 * SO_REUSEADDR; prints "listening on PORT" to stdout. Returns the fd, or
 * exits the process with a message. */
int hb_listen(int port);

/* Accepts one connection (non-blocking, TCP_NODELAY). Returns the fd, or -1
 * with errno set (EAGAIN when none is pending). */
int hb_accept(int listen_fd);

/* Parses "--port N" and returns N (default 0); exits on an unknown flag.
 * `extra` names one more flag taking a value ("--io", "--mode") whose value
 * is stored in *extra_value, or NULL. */
int hb_parse_args(int argc, char **argv, const char *extra, const char **extra_value);

/* I/O batching as run.sh's --io-batch names it: "off", "adaptive:US" or
 * "fixed:US" (US > 0, in microseconds). What a loop does with it is its
 * adapter's business (tickloop_new.h; libev: a collect interval for fixed). */
struct hb_io_batch {
    uint64_t ns;  /* the bound, 0: off */
    int adaptive; /* 1: adaptive:US, 0: fixed:US (or off) */
};

/* hb_parse_args, and also "--io-batch MODE" into *batch (zeroed first: off
 * when the flag is absent); exits on a mode it cannot parse. */
int hb_parse_args_batch(int argc, char **argv, const char *extra, const char **extra_value,
                        struct hb_io_batch *batch);

#ifdef __cplusplus
}
#endif

#endif
