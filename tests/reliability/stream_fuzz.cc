/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: random sequences of stream operations over socketpairs, on
 * epoll, on io_uring's completion path and on io_uring's readiness path
 * (each input runs on every one the machine has), with a ring of 4 buffers
 * of 256 bytes so that exhaustion, parking and short reads happen often.
 *
 * Each slot holds a tl_stream (its own allocation, freed in its close
 * callback, so a library that touched a closed stream trips ASan) and the
 * raw peer end of its socketpair, which the input drives directly: it sends
 * bytes, drains what the stream sent, half-closes or closes. Read callbacks
 * read operations from the same input (stop, close, write, nothing).
 *
 * Rules checked:
 * - order, both ways: the stream receives exactly the peer's byte sequence
 *   (a prefix of it), and the peer receives a prefix of the concatenation of
 *   the stream's queued writes;
 * - write callbacks run once per request, in the order queued, with 0,
 *   -ECANCELED (after a close), -EPIPE or -ECONNRESET;
 * - nothing after a close: no read callback once tl_stream_close returned,
 *   exactly one close callback, after every write callback of the stream;
 * - misuse answers: a request still queued is -EBUSY, a closing stream
 *   -EPIPE;
 * - connect and shutdown: a slot may be opened by tl_stream_connect to a
 *   UNIX listener (the peer is accepted once the kernel has the
 *   connection), with writes and reads started before its callback, which
 *   runs once, before any other callback of the stream (0, or -ECANCELED
 *   after a close); a connected stream refuses a connect (-EINVAL); a
 *   shutdown calls back once, after every write queued before it and
 *   before the close callback, with 0, the writes' error or -ECANCELED;
 *   writes after it are -EPIPE, a second shutdown too;
 * - at the end every stream closes and tl_loop_free succeeds.
 */
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <tickloop/tickloop.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "tests/loop_setup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

constexpr unsigned kSlots = 4;
constexpr unsigned kReqs = 4;      /* write requests per stream */
constexpr unsigned kMaxOps = 512;  /* top-level operations per input */
constexpr size_t kMaxWrite = 3000; /* bytes per write request */

inline uint8_t pattern(uint64_t k) {
    return (uint8_t)(k * 7 + 3);
}

struct Slot;

struct Req {
    tl_write_req req;
    struct iovec iov[2];
    uint8_t bytes[kMaxWrite];
    Slot *slot = nullptr;
    uint64_t seq = 0;
    bool queued = false;
};

struct Stream {
    tl_stream s;
    Slot *slot;
};

struct Slot {
    Stream *st = nullptr; /* null: no stream (closed and freed, or never made) */
    int peer = -1;
    bool closing = false, reading = false;
    bool connecting = false; /* tl_stream_connect's callback not run yet */
    int listener = -1;       /* a connecting stream's own, its peer end to accept */
    bool shut = false, shut_done = false;
    uint64_t peer_sent = 0, stream_got = 0; /* peer -> stream */
    uint64_t queued = 0, peer_got = 0;      /* stream -> peer */
    uint64_t write_seq = 0, write_done = 0; /* requests queued / completed */
    Req reqs[kReqs];
};

struct Ctx {
    fuzz::Input *in;
    tl_loop *loop;
    struct sockaddr_un addr; /* of the last connecting slot's listener */
    socklen_t addrlen = 0;
    Slot slots[kSlots];
    unsigned closes = 0;
};

Ctx *ctx;

void on_close(tl_loop *, tl_stream *s) {
    Stream *st = static_cast<Stream *>(s->data);
    Slot *slot = st->slot;
    FUZZ_CHECK(slot->st == st && slot->closing, "close callback for a stream not closing");
    FUZZ_CHECK(slot->write_done == slot->write_seq, "close before a write callback");
    FUZZ_CHECK(!slot->connecting, "close before the connect callback");
    FUZZ_CHECK(!slot->shut || slot->shut_done, "close before the shutdown callback");
    slot->st = nullptr;
    ++ctx->closes;
    std::free(st);
}

void close_slot(Slot *slot) {
    if (!slot->st || slot->closing) return;
    int r = tl_stream_close(ctx->loop, &slot->st->s, on_close);
    FUZZ_CHECK(r == 0, "close: %d", r);
    FUZZ_CHECK(tl_stream_close(ctx->loop, &slot->st->s, on_close) == -EPIPE, "second close");
    slot->closing = true;
    slot->reading = false;
}

void on_write(tl_loop *, tl_write_req *wr, int status) {
    Req *req = static_cast<Req *>(wr->data);
    Slot *slot = req->slot;
    FUZZ_CHECK(req->queued, "callback of a request not queued");
    FUZZ_CHECK(req->seq == slot->write_done, "write callbacks out of order");
    FUZZ_CHECK(status == 0 || status == -ECANCELED || status == -EPIPE || status == -ECONNRESET,
               "write status %d", status);
    FUZZ_CHECK(status != -ECANCELED || slot->closing, "cancelled without a close");
    FUZZ_CHECK(!slot->connecting, "a write callback before the connect callback");
    FUZZ_CHECK(!slot->shut_done, "a write callback after the shutdown callback");
    req->queued = false;
    ++slot->write_done;
}

bool write_slot(Slot *slot, size_t n) {
    if (!slot->st) return false;
    for (Req &req : slot->reqs) {
        if (req.queued) continue;
        req.slot = slot;
        for (size_t i = 0; i < n; ++i) req.bytes[i] = pattern(slot->queued + i);
        /* Two iovecs, the cut chosen by the length. */
        size_t cut = n / 3;
        req.iov[0] = {req.bytes, cut};
        req.iov[1] = {req.bytes + cut, n - cut};
        req.req.data = &req;
        int r = tl_stream_write(ctx->loop, &slot->st->s, &req.req, req.iov, 2, on_write);
        if (slot->closing || slot->shut) {
            FUZZ_CHECK(r == -EPIPE, "write on a closing stream: %d", r);
            return false;
        }
        FUZZ_CHECK(r == 0, "write: %d", r);
        req.queued = true;
        req.seq = slot->write_seq++;
        slot->queued += n;
        FUZZ_CHECK(tl_stream_write(ctx->loop, &slot->st->s, &req.req, req.iov, 2, on_write) ==
                       -EBUSY,
                   "a queued request queued again");
        return true;
    }
    return false;
}

void on_read(tl_loop *loop, tl_stream *s, const void *buf, ptrdiff_t n) {
    Stream *st = static_cast<Stream *>(s->data);
    Slot *slot = st->slot;
    FUZZ_CHECK(slot->st == st && !slot->closing, "read callback after close");
    FUZZ_CHECK(slot->reading, "read callback after read_stop");
    FUZZ_CHECK(!slot->connecting, "a read callback before the connect callback");
    if (n > 0) {
        const uint8_t *p = static_cast<const uint8_t *>(buf);
        for (ptrdiff_t i = 0; i < n; ++i)
            FUZZ_CHECK(p[i] == pattern(slot->stream_got + (uint64_t)i), "byte %llu reordered",
                       (unsigned long long)(slot->stream_got + (uint64_t)i));
        slot->stream_got += (uint64_t)n;
        FUZZ_CHECK(slot->stream_got <= slot->peer_sent, "more bytes than sent");
    } else {
        slot->reading = false;
    }
    switch (ctx->in->u8() % 8) {
    case 0:
        if (slot->reading) {
            FUZZ_CHECK(tl_stream_read_stop(loop, s) == 0, "read_stop in callback");
            slot->reading = false;
        }
        break;
    case 1:
        close_slot(slot);
        break;
    case 2:
        write_slot(slot, 1 + ctx->in->u8() % 64);
        break;
    default:
        break;
    }
}

/* A slot for the stream's fd and its peer (-1: to be accepted). */
void open_slot_fds(Slot *slot, int fd, int peer) {
    /* Small socket buffers: short sends and queued writes. */
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    Stream *st = static_cast<Stream *>(std::malloc(sizeof(Stream)));
    FUZZ_CHECK(st, "malloc");
    tl_stream_init(&st->s, fd, st);
    st->slot = slot;
    for (Req &r : slot->reqs) FUZZ_CHECK(!r.queued, "a request outlived its stream");
    slot->st = st;
    slot->peer = peer;
    slot->closing = slot->reading = false;
    slot->connecting = slot->shut = slot->shut_done = false;
    slot->peer_sent = slot->stream_got = slot->queued = slot->peer_got = 0;
    slot->write_seq = slot->write_done = 0;
}

void open_slot(Slot *slot) {
    int fds[2];
    if (socket_pair(fds) < 0) return;
    int small = 4096;
    setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    open_slot_fds(slot, fds[0], fds[1]);
}

void on_connect(tl_loop *, tl_stream *s, int status) {
    Slot *slot = static_cast<Stream *>(s->data)->slot;
    FUZZ_CHECK(slot->connecting, "a second connect callback");
    FUZZ_CHECK(status == (slot->closing ? -ECANCELED : 0), "connect status %d", status);
    slot->connecting = false;
}

void on_shutdown(tl_loop *, tl_stream *s, int status) {
    Slot *slot = static_cast<Stream *>(s->data)->slot;
    FUZZ_CHECK(slot->shut && !slot->shut_done, "a shutdown callback not due");
    FUZZ_CHECK(slot->write_done == slot->write_seq, "shutdown before a write callback");
    FUZZ_CHECK(status == 0 || status == -ECANCELED || status == -EPIPE || status == -ECONNRESET,
               "shutdown status %d", status);
    FUZZ_CHECK(status != -ECANCELED || slot->closing, "shutdown cancelled without a close");
    slot->shut_done = true;
}

/* A UNIX listener of its own (an abstract name) for a connecting slot, so
   that what it accepts is that slot's connection. */
int new_listener() {
    static unsigned listeners;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    std::memset(&ctx->addr, 0, sizeof ctx->addr);
    ctx->addr.sun_family = AF_UNIX;
    int len = snprintf(ctx->addr.sun_path + 1, sizeof ctx->addr.sun_path - 1,
                       "tl-stream-fuzz-%d-%u", (int)getpid(), listeners++);
    ctx->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
    FUZZ_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&ctx->addr, ctx->addrlen) == 0 &&
                   listen(fd, 4) == 0,
               "UNIX listener");
    return fd;
}

/* A slot whose stream connects to a listener of its own; the peer end is
   accepted by peer_ready once the kernel has the connection. */
void open_connecting(Slot *slot) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    int listener = new_listener();
    open_slot_fds(slot, fd, -1);
    slot->listener = listener;
    int r = tl_stream_connect(ctx->loop, &slot->st->s, (struct sockaddr *)&ctx->addr, ctx->addrlen,
                              on_connect);
    FUZZ_CHECK(r == 0, "connect: %d", r);
    slot->connecting = true;
}

/* The peer end of a connecting slot, accepted without blocking. */
bool peer_ready(Slot *slot) {
    if (slot->listener >= 0) {
        int fd = accept4(slot->listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return false;
        close(slot->listener);
        slot->listener = -1;
        slot->peer = fd;
    }
    return slot->peer >= 0;
}

void shutdown_slot(Slot *slot) {
    if (!slot->st) return;
    int r = tl_stream_shutdown(ctx->loop, &slot->st->s, on_shutdown);
    if (slot->closing || slot->shut) {
        FUZZ_CHECK(r == -EPIPE, "shutdown on a closing or shut stream: %d", r);
        return;
    }
    /* A socketpair whose peer went may have no peer any more. */
    FUZZ_CHECK(r == 0 || (r == -ENOTCONN && slot->peer < 0), "shutdown: %d", r);
    if (r == 0) slot->shut = true;
}

void peer_send(Slot *slot, size_t n) {
    if (!peer_ready(slot)) return;
    uint8_t buf[4096];
    if (n > sizeof buf) n = sizeof buf;
    for (size_t i = 0; i < n; ++i) buf[i] = pattern(slot->peer_sent + i);
    ssize_t k = send(slot->peer, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) slot->peer_sent += (uint64_t)k;
}

void peer_drain(Slot *slot) {
    if (!peer_ready(slot)) return;
    uint8_t buf[8192];
    ssize_t k;
    while ((k = recv(slot->peer, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
        for (ssize_t i = 0; i < k; ++i)
            FUZZ_CHECK(buf[i] == pattern(slot->peer_got + (uint64_t)i), "peer got byte %llu wrong",
                       (unsigned long long)(slot->peer_got + (uint64_t)i));
        slot->peer_got += (uint64_t)k;
        FUZZ_CHECK(slot->peer_got <= slot->queued, "peer got more than queued");
    }
}

/* One top-level operation of the input on slot. */
void step(Slot *slot, unsigned op) {
    switch (op) {
    case 0:
        if (slot->st) {
            int e = tl_stream_read_start(ctx->loop, &slot->st->s, on_read);
            FUZZ_CHECK(e == (slot->closing ? -EPIPE : 0), "read_start: %d", e);
            if (e == 0) slot->reading = true;
        }
        break;
    case 1:
        if (slot->st) {
            int e = tl_stream_read_stop(ctx->loop, &slot->st->s);
            FUZZ_CHECK(e == (slot->closing ? -EPIPE : 0), "read_stop: %d", e);
            if (e == 0) slot->reading = false;
        }
        break;
    case 2:
        write_slot(slot, 1 + ctx->in->u16() % kMaxWrite);
        break;
    case 3:
        close_slot(slot);
        break;
    case 4:
        peer_send(slot, 1 + ctx->in->u16() % 4096);
        break;
    case 5:
        peer_drain(slot);
        break;
    case 6:
        if (peer_ready(slot)) shutdown(slot->peer, SHUT_WR);
        break;
    case 7:
        if (peer_ready(slot)) {
            close(slot->peer);
            slot->peer = -1;
        }
        break;
    case 8:
        /* A fresh pair once the old stream is gone. */
        if (!slot->st) {
            if (slot->peer >= 0) close(slot->peer);
            if (slot->listener >= 0) close(slot->listener);
            slot->listener = -1;
            open_slot(slot);
        }
        break;
    case 9:
        if (slot->st)
            FUZZ_CHECK(tl_stream_write_queue_size(&slot->st->s) <= slot->queued, "queue size");
        break;
    case 10:
        shutdown_slot(slot);
        break;
    case 11:
        /* A connected (or connecting) stream takes no connect. */
        if (slot->st) {
            int e = tl_stream_connect(ctx->loop, &slot->st->s, (struct sockaddr *)&ctx->addr,
                                      ctx->addrlen, on_connect);
            FUZZ_CHECK(e == (slot->closing ? -EPIPE : -EINVAL), "connect again: %d", e);
        }
        break;
    case 12:
        /* A connecting stream once the old one is gone. */
        if (!slot->st) {
            if (slot->peer >= 0) close(slot->peer);
            if (slot->listener >= 0) close(slot->listener);
            slot->peer = slot->listener = -1;
            open_connecting(slot);
        }
        break;
    default:
        FUZZ_CHECK(tl_loop_run(ctx->loop, TL_RUN_NOWAIT) >= 0, "run");
        break;
    }
}

void run_input(const uint8_t *data, size_t size, tl_io_kind io, const char *path) {
    tl_loop *loop;
    if (new_stream_loop(&loop, io, path, 256, 4) < 0) return; /* io_uring missing here */
    fuzz::Input in(data, size);
    Ctx c;
    c.in = &in;
    c.loop = loop;
    ctx = &c;
    close(new_listener()); /* an address for case 11 before any connecting slot */
    for (Slot &slot : c.slots) open_slot(&slot);
    for (unsigned op = 0; op < kMaxOps && !in.empty(); ++op) {
        Slot *slot = &c.slots[in.u8() % kSlots];
        step(slot, in.u8() % 15u);
    }
    /* Callbacks read no more input from here on. */
    in.finish();
    for (Slot &slot : c.slots) {
        if (slot.st && !slot.closing) close_slot(&slot);
        if (slot.peer >= 0) close(slot.peer);
        if (slot.listener >= 0) close(slot.listener);
        slot.peer = slot.listener = -1;
    }
    /* Blocking iterations, bounded by an unreferenced timer: a send the
       close cancelled may take the kernel a moment (io_uring), longer than
       any fixed number of non-blocking iterations. */
    tl_timer limit;
    tl_timer_init(
        &limit, [](tl_loop *l, tl_timer *) { tl_loop_stop(l); }, nullptr);
    tl_timer_start(loop, &limit, 5000000000ull, 0);
    tl_timer_set_ref(loop, &limit, 0);
    tl_loop_run(loop, TL_RUN_DEFAULT);
    tl_timer_stop(loop, &limit);
    for (Slot &slot : c.slots) FUZZ_CHECK(!slot.st, "a stream never finished closing");
    FUZZ_CHECK(tl_loop_free(loop) == 0, "tl_loop_free");
    ctx = nullptr;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_input(data, size, TL_IO_EPOLL, nullptr);
    run_input(data, size, TL_IO_URING, nullptr);
    run_input(data, size, TL_IO_URING, "readiness");
    return 0;
}

#ifdef TL_FUZZ_REPLAY
#include "replay.h"
/* Found by this fuzzer on io_uring: a stream closed with a send in flight
   whose completion was -EAGAIN (the kernel gave up on a full socket in an
   io-wq worker) must report -ECANCELED to its write callback, not -EAGAIN.
   The kernel's timing decides whether the input reaches it: about one
   replay in two does on a 6.x kernel. */
FUZZ_REGRESSION(closed_send_again_is_cancelled)
#endif
