/* SPDX-License-Identifier: MIT */
/*
 * Streams and listeners misused: NULL arguments, streams not initialised,
 * not open or not sockets, a request queued twice, another loop or a second
 * handle on the fd, calls on a closed stream, listeners on bad descriptors,
 * and read buffer options out of range. Each is refused with a negative
 * errno and changes nothing. meson runs this file as it runs streams.c:
 * once per I/O backend and once on io_uring's readiness path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "loop_helpers.h"
#include "stream_helpers.h"

static void never_accept(tl_loop *loop, tl_listener *l, int fd) {
    (void)loop;
    (void)l;
    (void)fd;
    cr_assert_fail("no connection was made");
}

static void never_write(tl_loop *loop, tl_write_req *req, int status) {
    (void)loop;
    (void)req;
    (void)status;
}

Test(streams, null_arguments_are_einval) {
    tl_loop *loop = new_loop();
    int p[2];
    make_pair(p);
    tl_stream s;
    tl_write_req req;
    struct iovec iov = {(void *)"x", 1};
    tl_stream_init(NULL, 0, NULL);
    tl_stream_init(&s, p[0], NULL);
    cr_assert_eq(tl_stream_read_start(NULL, &s, on_read), -EINVAL);
    cr_assert_eq(tl_stream_read_start(loop, NULL, on_read), -EINVAL);
    cr_assert_eq(tl_stream_read_start(loop, &s, NULL), -EINVAL);
    cr_assert_eq(tl_stream_read_stop(NULL, &s), -EINVAL);
    cr_assert_eq(tl_stream_read_stop(loop, NULL), -EINVAL);
    cr_assert_eq(tl_stream_write(NULL, &s, &req, &iov, 1, never_write), -EINVAL);
    cr_assert_eq(tl_stream_write(loop, NULL, &req, &iov, 1, never_write), -EINVAL);
    cr_assert_eq(tl_stream_write(loop, &s, NULL, &iov, 1, never_write), -EINVAL);
    cr_assert_eq(tl_stream_write(loop, &s, &req, NULL, 1, never_write), -EINVAL);
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, 1, NULL), -EINVAL);
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, -1, never_write), -EINVAL);
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, 100000, never_write), -EINVAL);
    cr_assert_eq(tl_stream_close(NULL, &s, NULL), -EINVAL);
    cr_assert_eq(tl_stream_close(loop, NULL, NULL), -EINVAL);
    cr_assert_eq(tl_stream_set_ref(NULL, &s, 0), -EINVAL);
    cr_assert_eq(tl_stream_set_ref(loop, NULL, 0), -EINVAL);
    cr_assert_eq(tl_stream_write_queue_size(NULL), 0);
    cr_assert_eq(tl_listener_start(NULL, NULL, 0, never_accept, NULL), -EINVAL);
    cr_assert_eq(tl_listener_stop(NULL, NULL), -EINVAL);
    cr_assert_eq(tl_listener_set_ref(NULL, NULL, 0), -EINVAL);
    cr_assert(tl_loop_stream_path(NULL) == NULL);
    close(p[0]);
    close(p[1]);
    free_loop(loop);
}

/* A stream never initialised, not started, not a socket, not open, and a
 * write request queued twice. */
Test(streams, unusable_streams_and_a_request_queued_twice_are_refused) {
    tl_loop *loop = new_loop();
    int p[2];
    make_pair(p);
    tl_stream s, raw;
    tl_write_req req;
    struct iovec iov = {(void *)"x", 1};
    memset(&raw, 0, sizeof raw);
    cr_assert_eq(tl_stream_read_start(loop, &raw, on_read), -EINVAL);
    cr_assert_eq(tl_stream_write(loop, &raw, &req, &iov, 1, never_write), -EINVAL);
    cr_assert_eq(tl_stream_close(loop, &raw, NULL), -EINVAL);
    cr_assert_eq(tl_stream_read_stop(loop, &raw), -EINVAL);
    tl_stream_init(&s, p[0], NULL);
    cr_assert_eq(tl_stream_read_stop(loop, &s), 0, "stop of a stream never started");
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    tl_stream_init(&s, devnull, NULL);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), -ENOTSOCK);
    tl_stream_init(&s, -1, NULL);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), -EBADF);
    tl_stream_init(&s, 100000, NULL);
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, 1, never_write), -EBADF);
    tl_stream_init(&s, p[1], NULL);
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, 1, never_write), 0);
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, 1, never_write), -EBUSY);
    cr_assert_eq(tl_stream_close(loop, &s, NULL), 0);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    close(devnull);
    close(p[0]);
    free_loop(loop);
}

/* A started stream is bound to its loop and its fd; once closed, every call
 * on it is -EPIPE. */
Test(streams, other_loops_second_handles_and_closed_streams_are_refused) {
    tl_loop *loop = new_loop();
    tl_loop *other = new_loop();
    int p[2];
    make_pair(p);
    tl_stream s, s2;
    tl_write_req req;
    struct iovec iov = {(void *)"x", 1};
    tl_stream_init(&s, p[0], NULL);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), 0);
    cr_assert_eq(tl_stream_read_start(other, &s, on_read), -EINVAL);
    cr_assert_eq(tl_stream_read_stop(other, &s), -EINVAL);
    cr_assert_eq(tl_stream_write(other, &s, &req, &iov, 1, never_write), -EINVAL);
    cr_assert_eq(tl_stream_close(other, &s, NULL), -EINVAL);
    cr_assert_eq(tl_stream_set_ref(other, &s, 0), -EINVAL);
    tl_stream_init(&s2, p[0], NULL);
    cr_assert_eq(tl_stream_read_start(loop, &s2, on_read), -EBUSY);
    tl_io w;
    tl_io_init(&w, p[0], (tl_io_cb)never_write, NULL);
    cr_assert_eq(tl_io_start(loop, &w, TL_READ), -EEXIST);
    check_loop(loop);
    cr_assert_eq(tl_stream_close(loop, &s, NULL), 0);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), -EPIPE);
    cr_assert_eq(tl_stream_read_stop(loop, &s), -EPIPE);
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, 1, never_write), -EPIPE);
    cr_assert_eq(tl_stream_close(loop, &s, NULL), -EPIPE);
    cr_assert_eq(tl_loop_run(loop, TL_RUN_DEFAULT), 0);
    cr_assert_eq(tl_stream_close(loop, &s, NULL), -EPIPE, "closed");
    cr_assert_eq(tl_stream_write(loop, &s, &req, &iov, 1, never_write), -EPIPE);
    close(p[1]);
    free_loop(loop);
    free_loop(other);
}

Test(listeners, bad_descriptors_double_starts_and_other_loops_are_refused) {
    tl_loop *loop = new_loop();
    tl_loop *other = new_loop();
    int p[2];
    make_pair(p);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    struct sockaddr_in addr;
    int lfd = tcp_listener(&addr, 4);
    tl_listener l, l2;
    memset(&l, 0, sizeof l);
    memset(&l2, 0, sizeof l2);
    cr_assert_eq(tl_listener_start(loop, &l, lfd, NULL, NULL), -EINVAL);
    cr_assert_eq(tl_listener_start(loop, &l, -1, never_accept, NULL), -EBADF);
    cr_assert_eq(tl_listener_start(loop, &l, p[1], never_accept, NULL), -EINVAL,
                 "not a listening socket");
    cr_assert_eq(tl_listener_start(loop, &l, devnull, never_accept, NULL), -ENOTSOCK);
    cr_assert_eq(tl_listener_stop(loop, &l), 0, "not started");
    cr_assert_eq(tl_listener_start(loop, &l, lfd, never_accept, NULL), 0);
    cr_assert_eq(tl_listener_start(loop, &l, lfd, never_accept, NULL), -EBUSY);
    cr_assert_eq(tl_listener_start(other, &l, lfd, never_accept, NULL), -EBUSY);
    cr_assert_eq(tl_listener_start(loop, &l2, lfd, never_accept, NULL), -EBUSY);
    cr_assert_eq(tl_listener_stop(other, &l), -EINVAL);
    cr_assert_eq(tl_listener_set_ref(other, &l, 0), -EINVAL);
    tl_stream s;
    tl_stream_init(&s, lfd, NULL);
    cr_assert_eq(tl_stream_read_start(loop, &s, on_read), -EBUSY);
    check_loop(loop);
    cr_assert_eq(tl_loop_free(loop), -EBUSY);
    cr_assert_eq(tl_listener_stop(loop, &l), 0);
    cr_assert_eq(tl_listener_stop(loop, &l), 0);
    close(devnull);
    close(lfd);
    close(p[0]);
    close(p[1]);
    free_loop(loop);
    free_loop(other);
}

Test(streams, read_buffer_options_out_of_range_are_einval) {
    tl_loop_options opts;
    tl_loop *bad = NULL;
    tl_loop_options_init(&opts);
    opts.read_buffer_size = 1000;
    cr_assert_eq(tl_loop_new(&bad, &opts), -EINVAL);
    opts.read_buffer_size = 128;
    cr_assert_eq(tl_loop_new(&bad, &opts), -EINVAL);
    opts.read_buffer_size = 0;
    opts.read_buffer_count = 3;
    cr_assert_eq(tl_loop_new(&bad, &opts), -EINVAL);
    opts.read_buffer_count = 65536;
    cr_assert_eq(tl_loop_new(&bad, &opts), -EINVAL);
    cr_assert(bad == NULL);
}
