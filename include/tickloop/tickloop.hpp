/* SPDX-License-Identifier: MIT */
/*
 * tickloop: header-only C++17 wrapper over the C API.
 *
 * RAII handles, std::chrono durations, any callable as a callback. Errors
 * from the C layer become std::system_error here, in the wrapper, and only
 * here. Callbacks are called from C through noexcept trampolines: a callback
 * that throws terminates the program rather than unwinding through C frames.
 *
 * Handles are neither copyable nor movable: the loop holds their address
 * while they are active. A handle stops itself when destroyed; destroy the
 * handles before their Loop.
 *
 * Callables up to kInlineCallable bytes are stored inside the handle (no
 * allocation); larger ones are allocated once, when the callback is set.
 */
#ifndef TICKLOOP_TICKLOOP_HPP
#define TICKLOOP_TICKLOOP_HPP

#include <chrono>
#include <cstddef>
#include <new>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "tickloop.h"

namespace tickloop {

using std::chrono::nanoseconds;

namespace detail {

inline int check(int r, const char *what) {
    if (r < 0) throw std::system_error(-r, std::generic_category(), what);
    return r;
}

inline uint64_t to_ns(nanoseconds d) {
    return d.count() < 0 ? 0 : (uint64_t)d.count();
}

/* Room for a lambda capturing a few pointers, or a member-function binding. */
inline constexpr std::size_t kInlineCallable = 48;

/* A type-erased callable with small-buffer storage; non-copyable. */
template <class... Args>
class Callback {
public:
    Callback() = default;
    Callback(const Callback &) = delete;
    Callback &operator=(const Callback &) = delete;
    ~Callback() { reset(); }

    template <class F>
    void set(F &&f) {
        using Fn = std::decay_t<F>;
        reset();
        if constexpr (sizeof(Fn) <= kInlineCallable && alignof(Fn) <= alignof(std::max_align_t)) {
            ::new (static_cast<void *>(storage_)) Fn(std::forward<F>(f));
            target_ = storage_;
            destroy_ = [](void *p) noexcept { static_cast<Fn *>(p)->~Fn(); };
        } else {
            target_ = new Fn(std::forward<F>(f));
            destroy_ = [](void *p) noexcept { delete static_cast<Fn *>(p); };
        }
        invoke_ = [](void *p, Args... args) { (*static_cast<Fn *>(p))(args...); };
    }

    void operator()(Args... args) const {
        if (invoke_) invoke_(target_, args...);
    }

    void reset() noexcept {
        if (destroy_) destroy_(target_);
        target_ = nullptr;
        invoke_ = nullptr;
        destroy_ = nullptr;
    }

private:
    alignas(std::max_align_t) unsigned char storage_[kInlineCallable];
    void *target_ = nullptr;
    void (*invoke_)(void *, Args...) = nullptr;
    void (*destroy_)(void *) noexcept = nullptr;
};

} // namespace detail

/* Loop options; empty/zero fields keep the library defaults. */
struct Options {
    std::string timers; /* "heap2", "heap4", "wheel", "hwheel", ...; "": default */
    tl_io_kind io = TL_IO_AUTO;
    nanoseconds tick{0}; /* wheel granularity; 0: 1 ms */
    uint32_t wheel_slots = 0;
};

/* An event loop (tl_loop), used from one thread. */
class Loop {
public:
    Loop() : Loop(Options{}) {}
    explicit Loop(const Options &options) {
        tl_loop_options opts;
        tl_loop_options_init(&opts);
        opts.io = options.io;
        opts.timers = options.timers.empty() ? nullptr : options.timers.c_str();
        opts.tick_ns = detail::to_ns(options.tick);
        opts.wheel_slots = options.wheel_slots;
        detail::check(tl_loop_new(&loop_, &opts), "tl_loop_new");
    }
    Loop(const Loop &) = delete;
    Loop &operator=(const Loop &) = delete;
    /* Handles must be gone (they stop themselves); a loop still busy is
       leaked rather than freed under them. */
    ~Loop() { tl_loop_free(loop_); }

    /* Runs the loop; true while active handles remain. */
    bool run(tl_run_mode mode = TL_RUN_DEFAULT) {
        return detail::check(tl_loop_run(loop_, mode), "tl_loop_run") > 0;
    }
    void stop() noexcept { tl_loop_stop(loop_); }
    nanoseconds now() const noexcept { return nanoseconds(tl_now(loop_)); }
    void update_time() noexcept { tl_update_time(loop_); }
    const char *timers_name() const noexcept { return tl_loop_timers_name(loop_); }
    const char *io_name() const noexcept { return tl_loop_io_name(loop_); }
    tl_loop_stats stats() const noexcept {
        tl_loop_stats s;
        tl_loop_stats_get(loop_, &s);
        return s;
    }
    tl_loop *get() const noexcept { return loop_; }

private:
    tl_loop *loop_ = nullptr;
};

/* A timer; the callback receives the Timer. */
class Timer {
public:
    template <class F>
    Timer(Loop &loop, F &&callback) : loop_(loop) {
        tl_timer_init(&timer_, &Timer::trampoline, this);
        callback_.set(std::forward<F>(callback));
    }
    /* Member-function form: Timer t(loop, &Conn::on_idle, conn). */
    template <class T>
    Timer(Loop &loop, void (T::*method)(Timer &), T *object)
        : Timer(loop, [method, object](Timer &t) { (object->*method)(t); }) {}
    Timer(const Timer &) = delete;
    Timer &operator=(const Timer &) = delete;
    ~Timer() { tl_timer_stop(loop_.get(), &timer_); }

    /* (Re)starts: first after timeout, then every repeat if non-zero. */
    void start(nanoseconds timeout, nanoseconds repeat = nanoseconds(0)) {
        detail::check(
            tl_timer_start(loop_.get(), &timer_, detail::to_ns(timeout), detail::to_ns(repeat)),
            "tl_timer_start");
    }
    /* Restarts with the repeat interval (std::system_error if it is 0). */
    void again() { detail::check(tl_timer_again(loop_.get(), &timer_), "tl_timer_again"); }
    void stop() noexcept { tl_timer_stop(loop_.get(), &timer_); }
    bool active() const noexcept { return tl_timer_active(&timer_) != 0; }
    nanoseconds deadline() const noexcept { return nanoseconds(timer_.deadline); }
    nanoseconds repeat() const noexcept { return nanoseconds(timer_.repeat); }
    Loop &loop() const noexcept { return loop_; }

private:
    static void trampoline(tl_loop *, tl_timer *t) noexcept {
        Timer *self = static_cast<Timer *>(t->data);
        self->callback_(*self);
    }
    Loop &loop_;
    tl_timer timer_;
    detail::Callback<Timer &> callback_;
};

/* An fd watcher; the callback receives the Io and TL_READ|TL_WRITE|... bits. */
class Io {
public:
    template <class F>
    Io(Loop &loop, int fd, F &&callback) : loop_(loop) {
        tl_io_init(&io_, fd, &Io::trampoline, this);
        callback_.set(std::forward<F>(callback));
    }
    Io(const Io &) = delete;
    Io &operator=(const Io &) = delete;
    ~Io() { tl_io_stop(loop_.get(), &io_); }

    /* Starts watching, or changes the events of an active watcher. */
    void start(unsigned events) {
        detail::check(tl_io_start(loop_.get(), &io_, events), "tl_io_start");
    }
    void stop() noexcept { tl_io_stop(loop_.get(), &io_); }
    int fd() const noexcept { return io_.fd; }
    unsigned events() const noexcept { return io_.events; }

private:
    static void trampoline(tl_loop *, tl_io *w, unsigned revents) noexcept {
        Io *self = static_cast<Io *>(w->data);
        self->callback_(*self, revents);
    }
    Loop &loop_;
    tl_io io_;
    detail::Callback<Io &, unsigned> callback_;
};

/* A cross-thread wakeup: send() from any thread, the callback runs on the loop. */
class Async {
public:
    template <class F>
    Async(Loop &loop, F &&callback) : loop_(loop) {
        callback_.set(std::forward<F>(callback));
        detail::check(tl_async_start(loop_.get(), &async_, &Async::trampoline, this),
                      "tl_async_start");
    }
    Async(const Async &) = delete;
    Async &operator=(const Async &) = delete;
    ~Async() { tl_async_stop(loop_.get(), &async_); }

    /* Any thread; sends coalesce until the callback runs. */
    void send() { detail::check(tl_async_send(&async_), "tl_async_send"); }

private:
    static void trampoline(tl_loop *, tl_async *a) noexcept {
        Async *self = static_cast<Async *>(a->data);
        self->callback_(*self);
    }
    Loop &loop_;
    tl_async async_{};
    detail::Callback<Async &> callback_;
};

/* A signal watcher (signalfd); the callback receives the signal number. */
class Signal {
public:
    template <class F>
    Signal(Loop &loop, int signo, F &&callback) : loop_(loop) {
        callback_.set(std::forward<F>(callback));
        detail::check(tl_signal_start(loop_.get(), &signal_, signo, &Signal::trampoline, this),
                      "tl_signal_start");
    }
    Signal(const Signal &) = delete;
    Signal &operator=(const Signal &) = delete;
    ~Signal() { tl_signal_stop(loop_.get(), &signal_); }

private:
    static void trampoline(tl_loop *, tl_signal *s, int signo) noexcept {
        Signal *self = static_cast<Signal *>(s->data);
        self->callback_(signo);
    }
    Loop &loop_;
    tl_signal signal_{};
    detail::Callback<int> callback_;
};

} // namespace tickloop

#endif /* TICKLOOP_TICKLOOP_HPP */
