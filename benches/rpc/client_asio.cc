// SPDX-License-Identifier: MIT
// The RPC client on standalone Asio, in its idiom: async_connect per
// connection, an async_read_some chain, a steady_timer per in-flight slot
// (expires_after + async_wait at the send, cancel() at the answer, whose
// handler then runs with operation_aborted), and one async_write at a time
// per socket over the requests queued meanwhile. See rpc_common.h for the
// protocol and the counters.
//
//   rpc-client-asio --port N [--conns N --inflight N --seconds S]
#include <asio.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "rpc_common.h"

namespace {

using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Conn;
struct Slot {
    explicit Slot(asio::io_context &io) : timeout(io) {}
    asio::steady_timer timeout;
    rpc_frame frame{};
    Conn *c = nullptr;
    uint32_t index = 0, seq = 0;
    uint64_t sent_ns = 0, base_ns = 0;
    bool waiting = false;
};

struct Client;
struct Conn {
    explicit Conn(asio::io_context &io) : sock(io) {}
    tcp::socket sock;
    uint32_t index = 0;
    unsigned char carry[RPC_FRAME];
    size_t carried = 0;
    unsigned char buf[16384];
    std::vector<rpc_frame> queued, writing; // requests waiting for the write in progress
    std::vector<std::unique_ptr<Slot>> slots;
};

struct Client {
    asio::io_context io{1};
    rpc_opts o{};
    rpc_stats st{};
    std::vector<std::unique_ptr<Conn>> conns;
    int connected = 0, waiting = 0;
    bool draining = false;
    uint64_t last_send_ns = 0;
    asio::steady_timer window{io}, drain{io};

    void write_more(Conn &c) {
        if (!c.writing.empty() || c.queued.empty()) return;
        c.writing.swap(c.queued);
        asio::async_write(c.sock, asio::buffer(c.writing), [this, &c](std::error_code ec, size_t) {
            if (ec) std::exit(1);
            c.writing.clear();
            write_more(c);
        });
    }

    void send_request(Slot &sl) {
        if (draining) return;
        sl.frame.id = rpc_id(sl.c->index, sl.index, ++sl.seq);
        sl.sent_ns = rpc_now_ns();
        sl.base_ns = sl.sent_ns;
        last_send_ns = sl.sent_ns;
        sl.waiting = true;
        ++waiting;
        sl.timeout.expires_after(std::chrono::nanoseconds(RPC_TIMEOUT_NS));
        uint32_t seq = sl.seq;
        sl.timeout.async_wait([this, &sl, seq](std::error_code ec) {
            if (ec || !sl.waiting || sl.seq != seq) return; // cancelled: answered
            rpc_timed_out(&st, sl.base_ns, rpc_now_ns());
            sl.waiting = false;
            --waiting;
            send_request(sl);
        });
        sl.c->queued.push_back(sl.frame);
        write_more(*sl.c);
    }

    void answer(Conn &c, const unsigned char *b) {
        rpc_frame f;
        std::memcpy(&f, b, sizeof f);
        Slot &sl = *c.slots[rpc_id_slot(f.id) % (uint32_t)o.inflight];
        if (!sl.waiting || sl.frame.id != f.id) {
            rpc_stale(&st, (int)f.late);
            return;
        }
        sl.timeout.cancel();
        sl.waiting = false;
        --waiting;
        rpc_answered(&st, sl.sent_ns, rpc_now_ns(), (int)f.late);
        send_request(sl);
    }

    struct Frames {
        Client *self;
        Conn *c;
    };
    static void on_frame(void *ctx, const unsigned char *frame) {
        Frames *f = static_cast<Frames *>(ctx);
        f->self->answer(*f->c, frame);
    }

    void read(Conn &c) {
        c.sock.async_read_some(asio::buffer(c.buf), [this, &c](std::error_code ec, size_t n) {
            if (ec) {
                std::fprintf(stderr, "rpc-client-asio: connection %u: %s\n", c.index,
                             ec.message().c_str());
                std::exit(1);
            }
            Frames ctx{this, &c};
            rpc_frames(c.carry, &c.carried, c.buf, n, &Client::on_frame, &ctx);
            read(c);
        });
    }

    void drain_check() {
        drain.expires_after(std::chrono::milliseconds(50));
        drain.async_wait([this](std::error_code) {
            if (waiting == 0 && rpc_now_ns() - last_send_ns > RPC_LATE_NS + 50000000ull)
                io.stop();
            else
                drain_check();
        });
    }

    void start() {
        rpc_window_start(&st);
        window.expires_after(std::chrono::nanoseconds((uint64_t)(o.seconds * 1e9)));
        window.async_wait([this](std::error_code) {
            rpc_window_end(&st);
            draining = true;
            drain_check();
        });
        for (auto &c : conns)
            for (auto &sl : c->slots) send_request(*sl);
    }

    void open(uint32_t index, const tcp::endpoint &ep) {
        auto c = std::make_unique<Conn>(io);
        c->index = index;
        for (int k = 0; k < o.inflight; ++k) {
            auto sl = std::make_unique<Slot>(io);
            sl->c = c.get();
            sl->index = (uint32_t)k;
            c->slots.push_back(std::move(sl));
        }
        Conn &ref = *c;
        conns.push_back(std::move(c));
        ref.sock.async_connect(ep, [this, &ref](std::error_code ec) {
            if (ec) {
                std::fprintf(stderr, "rpc-client-asio: connect: %s\n", ec.message().c_str());
                std::exit(1);
            }
            ref.sock.set_option(tcp::no_delay(true));
            read(ref);
            if (++connected == o.conns) start();
        });
    }
};

} // namespace

int main(int argc, char **argv) {
    auto *cl = new Client; // lives until exit
    if (rpc_parse(argc, argv, &cl->o) < 0) return 2;
    rpc_stats_init(&cl->st);
    tcp::endpoint ep(asio::ip::make_address(cl->o.host), (unsigned short)cl->o.port);
    for (int i = 0; i < cl->o.conns; ++i) cl->open((uint32_t)i, ep);
    cl->io.run();
    rpc_report(&cl->st, "asio", 0);
    std::fflush(stdout);
    std::_Exit(0);
}
