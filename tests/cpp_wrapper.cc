/* SPDX-License-Identifier: MIT */
// The C++ wrapper (tickloop.hpp): RAII, chrono, callables stored without
// allocation when small, errors as std::system_error.
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <criterion/criterion.h>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <netinet/in.h>
#include <new>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <tickloop/tickloop.hpp>

using namespace std::chrono_literals;

// Counts heap allocations so a test can show that small callables do not.
static std::atomic<long> allocations{0};
void *operator new(std::size_t n) {
    ++allocations;
    if (void *p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
// The nothrow form too, so that whatever form the program uses, every new and
// delete pairs malloc with free, which AddressSanitizer checks. (The library
// itself uses neither: it allocates with malloc.)
void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
    ++allocations;
    return std::malloc(n ? n : 1);
}
void operator delete(void *p, const std::nothrow_t &) noexcept {
    std::free(p);
}
void operator delete(void *p) noexcept {
    std::free(p);
}
void operator delete(void *p, std::size_t) noexcept {
    std::free(p);
}

// Makes a loop with options o, which the library must refuse (`what` names
// the case in the failure); check then examines the error thrown.
static void expect_loop_refused(const tickloop::Options &o, const char *what,
                                const std::function<void(const std::system_error &)> &check) {
    try {
        tickloop::Loop loop(o);
        cr_assert_fail("%s accepted", what);
    } catch (const std::system_error &e) {
        check(e);
    }
}

Test(cpp_wrapper, timer_lambda_fires_and_loop_ends) {
    tickloop::Loop loop;
    int fired = 0;
    tickloop::Timer t(loop, [&](tickloop::Timer &self) {
        ++fired;
        cr_assert(!self.active());
    });
    t.start(2ms);
    cr_assert(t.active());
    cr_assert_not(loop.run());
    cr_assert_eq(fired, 1);
    cr_assert_geq(loop.now().count(), t.deadline().count());
}

/* std::chrono time points pick the clock: steady_clock is MONOTONIC,
 * system_clock REALTIME, boot_clock BOOTTIME; never early on each. */
Test(cpp_wrapper, start_at_with_chrono_clocks_and_leeway) {
    tickloop::Loop loop;
    int fired[3] = {0, 0, 0};
    bool early = false;
    tickloop::Timer mono(loop, [&](tickloop::Timer &self) {
        early |= std::chrono::steady_clock::now().time_since_epoch() < self.deadline();
        ++fired[0];
    });
    tickloop::Timer boot(loop, [&](tickloop::Timer &self) {
        early |= tickloop::boot_clock::now().time_since_epoch() < self.deadline();
        ++fired[1];
    });
    /* Periodic on the wall clock: three ticks, then stop. */
    tickloop::Timer wall(loop, [&](tickloop::Timer &self) {
        early |=
            std::chrono::system_clock::now().time_since_epoch() < self.deadline() - self.repeat();
        if (++fired[2] == 3) self.stop();
    });
    mono.set_leeway(2ms);
    cr_assert(mono.leeway() == 2ms); /* 62,500 << 5: exact in 16 bits */
    mono.start_at(std::chrono::steady_clock::now() + 5ms);
    boot.start_at(tickloop::boot_clock::now() + 5ms);
    wall.start_at(std::chrono::system_clock::now() + 2ms, 3ms);
    cr_assert_eq(mono.clock(), TL_CLOCK_MONOTONIC);
    cr_assert_eq(boot.clock(), TL_CLOCK_BOOTTIME);
    cr_assert_eq(wall.clock(), TL_CLOCK_REALTIME);
    cr_assert_eq(wall.repeat(), std::chrono::nanoseconds(3ms));
    cr_assert_not(loop.run());
    cr_assert_eq(fired[0], 1);
    cr_assert_eq(fired[1], 1);
    cr_assert_eq(fired[2], 3);
    cr_assert_not(early);
    /* A relative start makes it MONOTONIC again. */
    boot.start(1ms);
    cr_assert_eq(boot.clock(), TL_CLOCK_MONOTONIC);
    boot.stop();
}

Test(cpp_wrapper, small_captures_do_not_allocate) {
    tickloop::Loop loop;
    int a = 0, b = 0, c = 0;
    long before = allocations.load();
    tickloop::Timer t(loop, [&a, &b, &c](tickloop::Timer &) { ++a, ++b, ++c; });
    t.start(1ms);
    t.stop();
    t.start(0ms);
    loop.run();
    cr_assert_eq(allocations.load(), before, "a 3-pointer capture allocated");
    cr_assert_eq(a, 1);
}

struct Connection {
    int idle_fired = 0;
    void on_idle(tickloop::Timer &) { ++idle_fired; }
};

Test(cpp_wrapper, member_function_callback) {
    tickloop::Loop loop(tickloop::Options{"heap2", TL_IO_EPOLL, 0ns, 0});
    cr_assert_str_eq(loop.timers_name(), "heap2");
    Connection conn;
    tickloop::Timer idle(loop, &Connection::on_idle, &conn);
    idle.start(1ms, 1ms);
    tickloop::Timer stop(loop, [&](tickloop::Timer &) { idle.stop(); });
    stop.start(10ms);
    loop.run();
    cr_assert_geq(conn.idle_fired, 1);
}

Test(cpp_wrapper, errors_become_system_error) {
    expect_loop_refused(tickloop::Options{"no-such-backend", TL_IO_AUTO, 0ns, 0}, "unknown backend",
                        [](const std::system_error &e) { cr_assert_eq(e.code().value(), ENOENT); });
    tickloop::Loop loop;
    tickloop::Timer t(loop, [](tickloop::Timer &) {});
    try {
        t.again(); // repeat is 0
        cr_assert_fail("again without repeat accepted");
    } catch (const std::system_error &e) {
        cr_assert_eq(e.code().value(), EINVAL);
    }
    cr_assert_not(t.active());
}

Test(cpp_wrapper, io_async_and_signal) {
    tickloop::Loop loop;
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    int reads = 0, asyncs = 0, signals = 0;
    tickloop::Io reader(loop, fds[0], [&](tickloop::Io &io, unsigned revents) {
        char c;
        if ((revents & TL_READ) && read(io.fd(), &c, 1) == 1) ++reads;
        io.stop();
    });
    reader.start(TL_READ);
    tickloop::Async wake(loop, [&](tickloop::Async &) { ++asyncs; });
    tickloop::Signal usr1(loop, SIGUSR1, [&](int signo) {
        cr_assert_eq(signo, SIGUSR1);
        ++signals;
    });
    std::thread sender([&] {
        cr_assert_eq(write(fds[1], "x", 1), 1);
        wake.send();
    });
    sender.join();
    raise(SIGUSR1);
    for (int i = 0; i < 100 && (reads == 0 || asyncs == 0 || signals == 0); ++i)
        loop.run(TL_RUN_ONCE);
    cr_assert_eq(reads, 1);
    cr_assert_eq(asyncs, 1);
    cr_assert_eq(signals, 1);
    close(fds[0]);
    close(fds[1]);
}

Test(cpp_wrapper, unknown_backend_is_named_with_the_registered_ones) {
    tickloop::Options o;
    o.timers = "bogus";
    expect_loop_refused(o, "unknown backend", [](const std::system_error &e) {
        cr_assert_eq(e.code().value(), ENOENT);
        std::string what = e.what();
        cr_assert(what.find("unknown timer backend 'bogus'; registered: heap2, heap4, wheel, "
                            "hwheel") != std::string::npos,
                  "%s", e.what());
    });
}

Test(cpp_wrapper, every_option_reaches_the_loop) {
    tickloop::Options o;
    o.timers = "wheel";
    o.io = TL_IO_EPOLL;
    o.tick = 2ms;
    o.wheel_slots = 64;
    o.max_timers = 1;
    o.max_timers_per_iteration = 4;
    o.timer_slack = 1us;
    tickloop::Loop loop(o);
    cr_assert_str_eq(loop.timers_name(), "wheel");
    cr_assert_str_eq(loop.io_name(), "epoll");
    tickloop::Timer a(loop, [](tickloop::Timer &) {}), b(loop, [](tickloop::Timer &) {});
    a.start(1s);
    try {
        b.start(1s);
        cr_assert_fail("max_timers = 1 let a second timer start");
    } catch (const std::system_error &e) {
        cr_assert_eq(e.code().value(), ENOSPC);
    }
}

Test(cpp_wrapper, io_batch_options_reach_the_loop) {
    tickloop::Options o;
    o.io = TL_IO_EPOLL;
    o.io_batch = 2ms;
    o.io_batch_adaptive = true;
    tickloop::Loop loop(o);
    /* Adaptive batching is in effect on epoll too; fixed is not. */
    cr_assert_eq(loop.stats().io_batch_ns, 2000000u);
    o.io_batch_adaptive = false;
    tickloop::Loop fixed(o);
    cr_assert_eq(fixed.stats().io_batch_ns, 0u);
    o.io_batch = 0ms;
    o.io_batch_adaptive = true;
    expect_loop_refused(o, "adaptive without a bound", [](const std::system_error &e) {
        cr_assert_eq(e.code().value(), EINVAL);
        cr_assert(std::string(e.what()).find("io_batch_adaptive") != std::string::npos, "%s",
                  e.what());
    });
}

Test(cpp_wrapper, adopt_and_borrow_a_c_loop) {
    tl_loop *raw;
    cr_assert_eq(tl_loop_new(&raw, nullptr), 0);
    {
        tickloop::Loop borrowed(raw, tickloop::Ownership::borrow);
        tickloop::Timer t(borrowed, [](tickloop::Timer &) {});
        t.start(0ms);
        cr_assert_not(borrowed.run());
    }
    /* Still ours: adopt it, and the Loop frees it (ASan would report a leak). */
    tickloop::Loop adopted(raw);
    cr_assert_eq(adopted.get(), raw);
    cr_assert_not(adopted.alive());
}

Test(cpp_wrapper, hooks_refs_and_embedding) {
    tickloop::Loop loop;
    std::string log;
    tickloop::Hook prepare(loop, TL_HOOK_PREPARE, [&](tickloop::Hook &) { log += 'P'; });
    tickloop::Hook check(loop, TL_HOOK_CHECK, [&](tickloop::Hook &h) {
        log += 'C';
        h.stop();
    });
    tickloop::Timer t(loop, [&](tickloop::Timer &) { log += 'T'; });
    prepare.start();
    check.start();
    prepare.set_ref(false);
    t.start(0ms);
    cr_assert(loop.alive());
    cr_assert_eq(loop.timeout().count(), 0);
    cr_assert_geq(loop.fd(), 0);
    cr_assert_not(loop.run());
    cr_assert_str_eq(log.c_str(), "PTC");
    /* Only the unreferenced prepare hook is left. */
    cr_assert(prepare.active());
    cr_assert_not(loop.alive());
    t.start(1h);
    t.set_ref(false);
    cr_assert_not(loop.alive());
    cr_assert_gt(loop.timeout().count(), 0);
}

Test(cpp_wrapper, signal_callback_receives_its_handle) {
    tickloop::Loop loop;
    int got = 0;
    tickloop::Signal *seen = nullptr;
    tickloop::Signal usr2(loop, SIGUSR2, [&](tickloop::Signal &s, int signo) {
        seen = &s;
        got = signo;
        s.stop();
    });
    raise(SIGUSR2);
    for (int i = 0; i < 100 && !got; ++i) loop.run(TL_RUN_ONCE);
    cr_assert_eq(got, SIGUSR2);
    cr_assert_eq(seen, &usr2);
    cr_assert_eq(usr2.signo(), SIGUSR2);
}

#ifndef NDEBUG
/* A handle that outlives its Loop: caught when the Loop goes, before the
   handle's destructor would touch freed memory. */
Test(cpp_wrapper, handle_outliving_its_loop_aborts_in_debug_builds, .signal = SIGABRT) {
    auto *loop = new tickloop::Loop();
    auto *t = new tickloop::Timer(*loop, [](tickloop::Timer &) {});
    t->start(1s);
    delete loop;
    delete t;
}
#else
/* Release builds detach the handle instead: stopped with the loop, its later
   calls fail with EINVAL, and its destructor touches nothing of the loop. */
Test(cpp_wrapper, handle_outliving_its_loop_is_detached_in_release_builds) {
    auto *loop = new tickloop::Loop();
    auto *t = new tickloop::Timer(*loop, [](tickloop::Timer &) {});
    t->start(1s);
    delete loop;
    cr_assert_not(t->active());
    try {
        t->start(1s);
        cr_assert_fail("a detached timer started");
    } catch (const std::system_error &e) {
        cr_assert_eq(e.code().value(), EINVAL);
    }
    delete t;
}
#endif

/* Streams and a Listener: a connection accepted by the Listener, an echo
   through two Streams, a write callback per request in order, EOF, and
   closes that free the handles (one by destroying a Stream still open). */
Test(cpp_wrapper, stream_echo_through_a_listener) {
    tickloop::Loop loop;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(lfd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(lfd, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    cr_assert_eq(getsockname(lfd, reinterpret_cast<sockaddr *>(&addr), &len), 0);
    cr_assert_eq(listen(lfd, 4), 0);

    std::string got;
    int eofs = 0, closed = 0;
    std::unique_ptr<tickloop::Stream> server;
    /* One request and one copy per chunk echoed: a request stays queued
       until its callback. */
    std::deque<std::string> echoed;
    std::deque<tickloop::WriteRequest> echo_reqs;
    tickloop::Listener listener(loop, lfd, [&](tickloop::Listener &l, int fd) {
        cr_assert(fd >= 0, "accept: %s", tl_strerror(fd));
        l.stop();
        server = std::make_unique<tickloop::Stream>(
            loop, fd, [&](tickloop::Stream &s, const void *buf, ptrdiff_t n) {
                if (n <= 0) {
                    s.close([&](tickloop::Stream &) { ++closed; });
                    return;
                }
                echoed.emplace_back(static_cast<const char *>(buf), (size_t)n);
                echo_reqs.emplace_back();
                s.write(echo_reqs.back(), echoed.back().data(), echoed.back().size());
            });
        server->read_start();
    });
    cr_assert_eq(listener.fd(), lfd);

    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_eq(connect(cfd, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    auto client = std::make_unique<tickloop::Stream>(
        loop, cfd, [&](tickloop::Stream &, const void *buf, ptrdiff_t n) {
            if (n > 0)
                got.append(static_cast<const char *>(buf), (size_t)n);
            else
                ++eofs;
        });
    client->read_start();
    std::vector<int> statuses;
    tickloop::WriteRequest w1([&](tickloop::WriteRequest &, int st) { statuses.push_back(st); });
    tickloop::WriteRequest w2(
        [&](tickloop::WriteRequest &, int st) { statuses.push_back(10 + st); });
    client->write(w1, "hello ", 6);
    client->write(w2, "world", 5);
    for (int i = 0; i < 1000 && got.size() < 11; ++i) loop.run(TL_RUN_ONCE);
    cr_assert_eq(got, "hello world");
    cr_assert_eq(statuses.size(), 2u);
    cr_assert_eq(statuses[0], 0);
    cr_assert_eq(statuses[1], 10);
    /* Half-close from the client: the server closes, the client sees EOF. */
    shutdown(cfd, SHUT_WR);
    for (int i = 0; i < 1000 && (!closed || !eofs); ++i) loop.run(TL_RUN_ONCE);
    cr_assert_eq(closed, 1);
    cr_assert_eq(eofs, 1);
    /* A Stream destroyed while open is closed by the loop. */
    client.reset();
    server.reset();
    loop.run(TL_RUN_DEFAULT);
    tl_loop_stats st;
    tl_loop_stats_get(loop.get(), &st);
    cr_assert_eq(st.streams_active, 0);
    close(lfd);
}

// The messages come from the library (tl_strerror, tl_loop_new_error), not
// the C library's text: an unknown backend's what() ended in "No such file
// or directory", and TICKLOOP_IO=bogus said only "tl_loop_new: Invalid
// argument". The codes still compare equal to std::errc.
Test(cpp_wrapper, loop_errors_name_what_was_refused) {
    tickloop::Options bogus;
    bogus.timers = "bogus";
    expect_loop_refused(bogus, "unknown backend", [](const std::system_error &e) {
        std::string what = e.what();
        cr_assert(what.find("No such file") == std::string::npos, "%s", e.what());
        cr_assert(e.code() == std::errc::no_such_file_or_directory);
        cr_assert_str_eq(e.code().category().name(), "tickloop");
    });
    setenv("TICKLOOP_IO", "bogus", 1);
    expect_loop_refused(tickloop::Options{}, "TICKLOOP_IO=bogus", [](const std::system_error &e) {
        cr_assert(e.code() == std::errc::invalid_argument);
        std::string what = e.what();
        cr_assert(what.find("TICKLOOP_IO='bogus'") != std::string::npos, "%s", e.what());
    });
    unsetenv("TICKLOOP_IO");
    tickloop::Options slots;
    slots.wheel_slots = 1000;
    expect_loop_refused(slots, "wheel_slots 1000", [](const std::system_error &e) {
        std::string what = e.what();
        cr_assert(what.find("wheel_slots is 1000") != std::string::npos, "%s", e.what());
    });
}

// Negative durations were clamped silently: start(-5s) fired at once and
// start_at(t, -1s) made a one-shot timer. They are EINVAL, naming the
// argument, and leave the timer as it was.
static void expect_negative_refused(const std::function<void()> &call, const char *name) {
    try {
        call();
        cr_assert_fail("%s: a negative duration accepted", name);
    } catch (const std::system_error &e) {
        cr_assert(e.code() == std::errc::invalid_argument, "%s: %s", name, e.what());
        std::string what = e.what();
        cr_assert(what.find("negative duration") != std::string::npos, "%s", e.what());
    }
}

Test(cpp_wrapper, negative_durations_are_einval) {
    tickloop::Loop loop;
    int fired = 0;
    tickloop::Timer t(loop, [&](tickloop::Timer &) { ++fired; });
    expect_negative_refused([&] { t.start(-5s); }, "start(-5s)");
    expect_negative_refused([&] { t.start(1ms, -1ms); }, "start(1ms, -1ms)");
    cr_assert_not(t.active());
    t.start(1h);
    expect_negative_refused([&] { t.start(-1ns); }, "start(-1ns) of an active timer");
    cr_assert(t.active());
    cr_assert(t.deadline() > loop.now() + 30min, "the refused start moved the timer");
    t.stop();
    expect_negative_refused([&] { t.start_at(std::chrono::steady_clock::now() + 1h, -1s); },
                            "start_at period -1s");
    cr_assert_not(t.active());
    expect_negative_refused([&] { t.set_leeway(-1ms); }, "set_leeway(-1ms)");
    tickloop::Options tick;
    tick.tick = -1ms;
    expect_negative_refused([&] { tickloop::Loop bad(tick); }, "Options::tick");
    tickloop::Options slack;
    slack.timer_slack = -1us;
    expect_negative_refused([&] { tickloop::Loop bad(slack); }, "Options::timer_slack");
    // A time point before the epoch is only a time already past.
    t.start_at(std::chrono::steady_clock::time_point(-1s));
    loop.run(TL_RUN_NOWAIT);
    cr_assert_eq(fired, 1);
}
