/* SPDX-License-Identifier: MIT */
/*
 * No allocation per connect or shutdown: the library's calls to malloc,
 * calloc, realloc, posix_memalign and aligned_alloc are counted (the test
 * links the static library with -Wl,--wrap for each, so every call inside
 * it goes through a counter here first) while the loop thread connects,
 * writes, shuts down and closes streams, after a few rounds that let the
 * loop make its one-time storage (io_uring's per-SQE slots, the read
 * buffers). meson runs it on epoll, io_uring and io_uring's readiness path.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop_helpers.h"

static __thread int counting;
static __thread long allocations;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);

void *__wrap_malloc(size_t n) {
    allocations += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size) {
    allocations += counting;
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
    allocations += counting;
    return __real_realloc(p, n);
}
int __wrap_posix_memalign(void **out, size_t align, size_t n) {
    allocations += counting;
    return __real_posix_memalign(out, align, n);
}
void *__wrap_aligned_alloc(size_t align, size_t n) {
    allocations += counting;
    return __real_aligned_alloc(align, n);
}

typedef struct round {
    tl_stream s;
    tl_write_req req;
    int connected, written, shut, closed, eof;
} round;

static void on_connect(tl_loop *loop, tl_stream *s, int status) {
    (void)loop;
    cr_assert_eq(status, 0, "connect: %s", tl_strerror(status));
    ((round *)s->data)->connected = 1;
}
static void on_write(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    cr_assert_eq(status, 0);
    ((round *)req->data)->written = 1;
}
static void on_shutdown(tl_loop *loop, tl_stream *s, int status) {
    (void)loop;
    cr_assert_eq(status, 0);
    ((round *)s->data)->shut = 1;
}
static void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    (void)buf;
    round *r = s->data;
    if (n > 0) return;
    r->eof = 1;
    cr_assert_eq(tl_stream_close(loop, s, NULL), 0);
    r->closed = 1;
}

/* One client's life: connect, read, write, shutdown; the server (plain
 * sockets) reads to EOF and closes; the client reads EOF and closes. */
static void one_round(tl_loop *loop, int lfd, const struct sockaddr_in *addr) {
    round r;
    memset(&r, 0, sizeof r);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    tl_stream_init(&r.s, fd, &r);
    r.req.data = &r;
    struct iovec v = {"request", 7};
    cr_assert_eq(
        tl_stream_connect(loop, &r.s, (const struct sockaddr *)addr, sizeof *addr, on_connect), 0);
    cr_assert_eq(tl_stream_read_start(loop, &r.s, on_read), 0);
    cr_assert_eq(tl_stream_write(loop, &r.s, &r.req, &v, 1, on_write), 0);
    cr_assert_eq(tl_stream_shutdown(loop, &r.s, on_shutdown), 0);
    while (!r.shut) tl_loop_run(loop, TL_RUN_ONCE);
    int sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    cr_assert(sfd >= 0);
    char buf[16];
    while (read(sfd, buf, sizeof buf) > 0) {
    }
    close(sfd);
    run_to_end(loop);
    cr_assert(r.connected && r.written && r.eof && r.closed);
}

Test(stream_connect_alloc, none_per_connect_or_shutdown) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(bind(lfd, (struct sockaddr *)&addr, sizeof addr) == 0);
    socklen_t len = sizeof addr;
    getsockname(lfd, (struct sockaddr *)&addr, &len);
    cr_assert(listen(lfd, 64) == 0);
    tl_loop *loop = new_loop();
    for (int i = 0; i < 4; ++i) one_round(loop, lfd, &addr); /* one-time storage */
    counting = 1;
    long before = allocations;
    for (int i = 0; i < 32; ++i) one_round(loop, lfd, &addr);
    counting = 0;
    cr_assert_eq(allocations, before, "%ld allocations in 32 connect/shutdown rounds",
                 allocations - before);
    /* The counter counts: the library's own allocation is seen. */
    counting = 1;
    tl_loop *other = new_loop();
    counting = 0;
    cr_assert_gt(allocations, before, "the wrapped allocator saw tl_loop_new");
    free_loop(other);
    free_loop(loop);
    close(lfd);
}
