/* SPDX-License-Identifier: MIT */
/*
 * server_asio.cc: the HTTP throughput benchmark's server on standalone Asio,
 * the same request handling as the others (http_core.c), written the way an
 * Asio program is: one io_context (concurrency hint 1: one thread), an
 * acceptor, per connection a tcp::socket with async_read_some into the
 * connection's input buffer and async_write of its output, and a
 * steady_timer for the idle timeout restarted on every answered request
 * (expires_after cancels the pending wait, async_wait waits again).
 *   server-asio [--port N]
 * Built twice: server-asio on Asio's default reactor (epoll), and
 * server-asio-io_uring with ASIO_HAS_IO_URING and ASIO_DISABLE_EPOLL, which
 * make io_uring Asio's backend for sockets and timers (liburing).
 */
#include <chrono>
#include <cstdio>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include "http_core.h"

namespace {

using asio::ip::tcp;

/* A connection frees itself once it is closing and no operation of it is
   in flight (each one's handler still runs, with operation_aborted). */
struct Conn {
    tcp::socket sock;
    asio::steady_timer idle;
    hb_conn h;
    bool reading = false, writing = false, closing = false;
    int waits = 0; /* idle waits whose handler has not run yet */

    explicit Conn(tcp::socket s) : sock(std::move(s)), idle(sock.get_executor()) {}

    void start() {
        asio::error_code ec;
        sock.set_option(tcp::no_delay(true), ec);
        hb_conn_init(&h, sock.native_handle());
        restart_idle();
        read();
    }

    void restart_idle() {
        idle.expires_after(std::chrono::milliseconds(HB_IDLE_MS));
        ++waits;
        idle.async_wait([this](const asio::error_code &ec) {
            --waits;
            if (!ec)
                close();
            else
                maybe_free();
        });
    }

    void read() {
        if (closing || reading || h.in_len == HB_IN_CAP) return;
        reading = true;
        sock.async_read_some(asio::buffer(h.in + h.in_len, HB_IN_CAP - h.in_len),
                             [this](const asio::error_code &ec, size_t n) {
                                 reading = false;
                                 if (closing) return maybe_free();
                                 if (ec) return close(); /* EOF or error: the client is gone */
                                 h.in_len += n;
                                 if (!writing) {
                                     if (hb_process(&h) > 0) restart_idle();
                                     write();
                                 }
                                 if (closing) return;
                                 if (h.in_len == HB_IN_CAP) return close(); /* a header too large */
                                 read();
                             });
    }

    void write() {
        if (closing || writing || h.out_off == h.out_len) return;
        writing = true;
        asio::async_write(sock, asio::buffer(h.out + h.out_off, h.out_len - h.out_off),
                          [this](const asio::error_code &ec, size_t) {
                              writing = false;
                              if (closing) return maybe_free();
                              if (ec || h.close_after) return close();
                              h.out_off = h.out_len = 0;
                              /* Requests read while the write was in flight. */
                              if (hb_process(&h) > 0) restart_idle();
                              write();
                              read();
                          });
    }

    void close() {
        if (closing) return;
        closing = true;
        asio::error_code ec;
        sock.close(ec);
        idle.cancel();
        maybe_free();
    }

    void maybe_free() {
        if (closing && !reading && !writing && waits == 0) delete this;
    }
};

void accept(tcp::acceptor &acceptor) {
    acceptor.async_accept([&acceptor](const asio::error_code &ec, tcp::socket s) {
        if (!ec) (new Conn(std::move(s)))->start();
        accept(acceptor);
    });
}

} // namespace

int main(int argc, char **argv) {
    int port = hb_parse_args(argc, argv, nullptr, nullptr);
    asio::io_context ctx(1);
    tcp::acceptor acceptor(ctx, tcp::v4(), hb_listen(port));
    accept(acceptor);
    ctx.run();
    return 1;
}
