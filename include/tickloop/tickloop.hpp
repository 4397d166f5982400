/* SPDX-License-Identifier: MIT */
/*
 * tickloop: header-only C++17 wrapper over the C API.
 *
 * RAII handles, std::chrono durations, any callable as a callback. Errors
 * from the C layer become std::system_error here, in the wrapper, and only
 * here: code() holds the errno (in tickloop::error_category(), which
 * compares equal to std::errc values), and what() names the call and says
 * what was wrong in the library's terms (tl_strerror; for a Loop, the
 * option tl_loop_new refused, from tl_loop_new_error, such as an unknown
 * timer backend with the registered ones). A negative duration is an
 * error too (EINVAL, what() names the argument): a timeout, repeat, period,
 * leeway, tick or slack below zero is a bug in the caller, never clamped to
 * zero; only a time point before its clock's epoch, given to start_at, is
 * simply a time already past. Callbacks are called from C through noexcept
 * trampolines: a callback that throws terminates the program rather than
 * unwinding through C frames.
 *
 * Handles (Timer, Io, Async, Signal, Hook, Stream, Listener) are neither
 * copyable nor movable: the loop holds their address while they are active. A handle stops itself
 * when destroyed; destroy the handles before their Loop. A Loop knows its
 * live handles: destroying it first is caught in debug builds (a message
 * naming the mistake, then abort) instead of a use-after-scope in the
 * handle's destructor; release builds detach the handles (each is stopped
 * and its later calls fail with EINVAL) and then free the loop.
 *
 * Callables up to kInlineCallable bytes are stored inside the handle (no
 * allocation); larger ones are allocated once, when the callback is set.
 */
#ifndef TICKLOOP_TICKLOOP_HPP
#define TICKLOOP_TICKLOOP_HPP

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "tickloop.h"
#include "timer_backend.h"

namespace tickloop {

using std::chrono::nanoseconds;

/* CLOCK_BOOTTIME as a std::chrono clock: steady, and it counts the time the
 * system spends suspended (std::chrono::steady_clock, CLOCK_MONOTONIC in
 * libstdc++ and libc++, does not). */
struct boot_clock {
    using duration = nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<boot_clock>;
    static constexpr bool is_steady = true;
    static time_point now() noexcept {
        return time_point(nanoseconds(static_cast<rep>(tl_clock_now(TL_CLOCK_BOOTTIME))));
    }
};

namespace detail {

/* The tl_clock a std::chrono clock reads. */
template <class Clock>
struct clock_of;
template <>
struct clock_of<std::chrono::steady_clock> {
    static constexpr tl_clock value = TL_CLOCK_MONOTONIC;
};
template <>
struct clock_of<std::chrono::system_clock> {
    static constexpr tl_clock value = TL_CLOCK_REALTIME;
};
template <>
struct clock_of<boot_clock> {
    static constexpr tl_clock value = TL_CLOCK_BOOTTIME;
};

/* The library's errno values, with tl_strerror's messages ("too many
   active timers (ENOSPC; ...)" rather than the C library's text, which can
   mislead: ENOENT is an unknown timer backend, not a missing file). They
   compare equal to the std::errc values of generic_category. */
class ErrorCategory final : public std::error_category {
public:
    const char *name() const noexcept override { return "tickloop"; }
    std::string message(int ev) const override { return tl_strerror(-ev); }
    std::error_condition default_error_condition(int ev) const noexcept override {
        return std::error_condition(ev, std::generic_category());
    }
};

} // namespace detail

/* The category of the std::system_error the wrapper throws. */
inline const std::error_category &error_category() noexcept {
    static const detail::ErrorCategory category;
    return category;
}

namespace detail {

inline int check(int r, const char *what) {
    if (r < 0) throw std::system_error(-r, error_category(), what);
    return r;
}

/* A duration as the C API's unsigned ns; negative is EINVAL (what names
   the argument), never clamped. */
inline uint64_t to_ns(nanoseconds d, const char *what) {
    if (d.count() < 0)
        throw std::system_error(EINVAL, error_category(),
                                std::string(what) + ": negative duration");
    return static_cast<uint64_t>(d.count());
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

/* Loop options; empty/zero fields keep the library defaults (the fields of
   tl_loop_options, in its order). */
struct Options {
    std::string timers; /* "heap2", "heap4", "wheel", "hwheel", ...; "": default */
    tl_io_kind io = TL_IO_AUTO;
    nanoseconds tick{0}; /* wheel granularity; 0: 1 ms */
    uint32_t wheel_slots = 0;
    uint32_t max_timers = 0;               /* 0: unlimited; then start throws ENOSPC */
    uint32_t max_timers_per_iteration = 0; /* 0: the library default               */
    nanoseconds timer_slack{0};            /* 0: leave the thread's slack alone    */
    nanoseconds collect_interval{0};       /* leeway lent to timers without one    */
    uint32_t read_buffer_size = 0;         /* streams' read buffers, bytes; 0: 16 KiB   */
    uint32_t read_buffer_count = 0;        /* buffers in the io_uring ring; 0: 256      */
    nanoseconds io_batch{0};               /* I/O batching bound; 0: off                */
    bool io_batch_adaptive = false;        /* gather only while the load is dense       */
};

/* Whether a Loop built from a tl_loop* frees it. */
enum class Ownership { adopt, borrow };

class Loop;

namespace detail {

/* What every wrapper handle shares: its Loop, and a place in the Loop's list
 * of live handles so that a Loop destroyed first can tell. */
class HandleBase {
public:
    HandleBase(const HandleBase &) = delete;
    HandleBase &operator=(const HandleBase &) = delete;

protected:
    inline HandleBase(Loop &loop, void (*detach)(HandleBase *) noexcept);
    inline ~HandleBase();
    /* The loop, or nullptr once the Loop was destroyed first (release). */
    inline tl_loop *raw() const noexcept;
    Loop *loop_;

private:
    friend class ::tickloop::Loop;
    /* Stops the C handle; called by a Loop destroyed first (release builds
       only: debug builds abort there instead). */
    [[maybe_unused]] void (*detach_)(HandleBase *) noexcept;
    HandleBase *prev_ = nullptr, *next_ = nullptr;
};

} // namespace detail

/* An event loop (tl_loop), used from one thread. */
class Loop {
public:
    Loop() : Loop(Options{}) {}
    explicit Loop(const Options &options) {
        tl_loop_options opts;
        tl_loop_options_init(&opts);
        opts.io = options.io;
        opts.timers = options.timers.empty() ? nullptr : options.timers.c_str();
        opts.tick_ns = detail::to_ns(options.tick, "Options::tick");
        opts.wheel_slots = options.wheel_slots;
        opts.max_timers = options.max_timers;
        opts.max_timers_per_iteration = options.max_timers_per_iteration;
        opts.timer_slack_ns = detail::to_ns(options.timer_slack, "Options::timer_slack");
        opts.collect_interval_ns =
            detail::to_ns(options.collect_interval, "Options::collect_interval");
        opts.read_buffer_size = options.read_buffer_size;
        opts.read_buffer_count = options.read_buffer_count;
        opts.io_batch_ns = detail::to_ns(options.io_batch, "Options::io_batch");
        opts.io_batch_adaptive = options.io_batch_adaptive ? 1 : 0;
        int r = tl_loop_new(&loop_, &opts);
        if (r < 0) {
            /* Which option or environment variable was refused, and why. */
            const char *why = tl_loop_new_error();
            throw std::system_error(-r, error_category(),
                                    std::string("tl_loop_new: ") + (why ? why : "failed"));
        }
    }
    /* Wraps a loop created with tl_loop_new: adopt frees it with the Loop,
       borrow leaves it to its owner. */
    explicit Loop(tl_loop *loop, Ownership ownership = Ownership::adopt)
        : loop_(loop), owned_(ownership == Ownership::adopt) {
        if (!loop) throw std::system_error(EINVAL, error_category(), "Loop(nullptr)");
    }
    Loop(const Loop &) = delete;
    Loop &operator=(const Loop &) = delete;
    /* Handles must be gone first (see the top of this file). A loop whose C
       handles are still active (started through get()) is leaked rather than
       freed under them. */
    ~Loop() {
        if (handles_) {
#ifndef NDEBUG
            std::fprintf(
                stderr,
                "tickloop: Loop destroyed while a Timer/Io/Async/Signal/Hook/Stream/Listener "
                "of it still exists; destroy the handles first\n");
            std::abort();
#else
            while (handles_) {
                detail::HandleBase *h = handles_;
                h->detach_(h);
                handles_ = h->next_;
                h->loop_ = nullptr;
                h->prev_ = h->next_ = nullptr;
            }
#endif
        }
        if (owned_) tl_loop_free(loop_);
    }

    /* Runs the loop; true while active (referenced) handles remain. */
    bool run(tl_run_mode mode = TL_RUN_DEFAULT) {
        return detail::check(tl_loop_run(loop_, mode), "tl_loop_run") > 0;
    }
    void stop() noexcept {
        tl_loop_stop(loop_);
    }
    /* A referenced handle is active (run() would iterate). */
    bool alive() const noexcept {
        return tl_loop_alive(loop_) != 0;
    }
    nanoseconds now() const noexcept {
        return nanoseconds(tl_now(loop_));
    }
    void update_time() noexcept {
        tl_update_time(loop_);
    }
    const char *timers_name() const noexcept {
        return tl_loop_timers_name(loop_);
    }
    const char *io_name() const noexcept {
        return tl_loop_io_name(loop_);
    }
    tl_loop_stats stats() const noexcept {
        tl_loop_stats s;
        tl_loop_stats_get(loop_, &s);
        return s;
    }
    /* tl_loop_lateness(); reset clears the histogram after the copy. */
    tl_lateness lateness(bool reset = false) noexcept {
        tl_lateness l;
        tl_loop_lateness(loop_, &l, reset ? 1 : 0);
        return l;
    }
    /* Embedding (tl_loop_fd / tl_loop_timeout): poll fd() for at most
       timeout() (nanoseconds::max(): no timer), then run(TL_RUN_NOWAIT). */
    int fd() const {
        return detail::check(tl_loop_fd(loop_), "tl_loop_fd");
    }
    nanoseconds timeout() const noexcept {
        uint64_t ns = tl_loop_timeout(loop_);
        return ns > static_cast<uint64_t>(nanoseconds::max().count())
                   ? nanoseconds::max()
                   : nanoseconds(static_cast<nanoseconds::rep>(ns));
    }
    /* In the child after fork(): new kernel objects, every handle kept. */
    void fork() {
        detail::check(tl_loop_fork(loop_), "tl_loop_fork");
    }
    tl_loop *get() const noexcept {
        return loop_;
    }

private:
    friend class detail::HandleBase;
    tl_loop *loop_ = nullptr;
    bool owned_ = true;
    detail::HandleBase *handles_ = nullptr; /* live wrapper handles */
};

namespace detail {

inline HandleBase::HandleBase(Loop &loop, void (*detach)(HandleBase *) noexcept)
    : loop_(&loop), detach_(detach) {
    next_ = loop.handles_;
    if (next_) next_->prev_ = this;
    loop.handles_ = this;
}

inline HandleBase::~HandleBase() {
    if (!loop_) return; /* detached by a Loop destroyed first */
    if (prev_)
        prev_->next_ = next_;
    else
        loop_->handles_ = next_;
    if (next_) next_->prev_ = prev_;
}

inline tl_loop *HandleBase::raw() const noexcept {
    return loop_ ? loop_->get() : nullptr;
}

} // namespace detail

/* A timer; the callback receives the Timer. */
class Timer : private detail::HandleBase {
public:
    template <class F>
    Timer(Loop &loop, F &&callback) : HandleBase(loop, &Timer::detach) {
        tl_timer_init(&timer_, &Timer::trampoline, this);
        callback_.set(std::forward<F>(callback));
    }
    /* Member-function form: Timer t(loop, &Conn::on_idle, conn). */
    template <class T>
    Timer(Loop &loop, void (T::*method)(Timer &), T *object)
        : Timer(loop, [method, object](Timer &t) { (object->*method)(t); }) {}
    ~Timer() { tl_timer_stop(raw(), &timer_); }

    /* (Re)starts: first after timeout, then every repeat if non-zero. A
       negative timeout or repeat throws EINVAL (the timer is left as it
       was). */
    void start(nanoseconds timeout, nanoseconds repeat = nanoseconds(0)) {
        uint64_t timeout_ns = detail::to_ns(timeout, "Timer::start: timeout");
        uint64_t repeat_ns = detail::to_ns(repeat, "Timer::start: repeat");
        detail::check(tl_timer_start(raw(), &timer_, timeout_ns, repeat_ns), "tl_timer_start");
    }
    /* Starts at an absolute time of steady_clock (TL_CLOCK_MONOTONIC),
       system_clock (TL_CLOCK_REALTIME: follows wall-clock steps) or
       boot_clock (TL_CLOCK_BOOTTIME); with a period, periodic without drift
       (missed periods skipped). See tl_timer_start_at. A time before the
       clock's epoch is a time already past (it fires in the next
       iteration); a negative period throws EINVAL. */
    template <class Clock, class Duration>
    void start_at(std::chrono::time_point<Clock, Duration> when,
                  nanoseconds period = nanoseconds(0)) {
        uint64_t period_ns = detail::to_ns(period, "Timer::start_at: period");
        auto since = std::chrono::duration_cast<nanoseconds>(when.time_since_epoch());
        uint64_t at = since.count() < 0 ? 0 : static_cast<uint64_t>(since.count());
        detail::check(
            tl_timer_start_at(raw(), &timer_, detail::clock_of<Clock>::value, at, period_ns),
            "tl_timer_start_at");
    }
    /* How late it may fire, from its next start on (stored with 16
       significant bits, rounded down). Negative throws EINVAL. */
    void set_leeway(nanoseconds leeway) {
        uint64_t ns = detail::to_ns(leeway, "Timer::set_leeway");
        detail::check(tl_timer_set_leeway(&timer_, ns), "tl_timer_set_leeway");
    }
    nanoseconds leeway() const noexcept { return nanoseconds(tl_timer_leeway(&timer_)); }
    tl_clock clock() const noexcept { return tl_timer_clock(&timer_); }
    /* Restarts with the repeat interval (std::system_error if it is 0). */
    void again() { detail::check(tl_timer_again(raw(), &timer_), "tl_timer_again"); }
    void stop() noexcept { tl_timer_stop(raw(), &timer_); }
    /* false: the timer no longer keeps the loop running (kept across starts). */
    void set_ref(bool ref) {
        detail::check(tl_timer_set_ref(raw(), &timer_, ref), "tl_timer_set_ref");
    }
    bool active() const noexcept { return tl_timer_active(&timer_) != 0; }
    /* On the timer's clock (clock()). */
    nanoseconds deadline() const noexcept { return nanoseconds(timer_.deadline); }
    nanoseconds repeat() const noexcept { return nanoseconds(timer_.repeat); }
    Loop &loop() const noexcept { return *loop_; }

private:
    static void detach(HandleBase *h) noexcept {
        Timer *self = static_cast<Timer *>(h);
        tl_timer_stop(self->raw(), &self->timer_);
    }
    static void trampoline(tl_loop *, tl_timer *t) noexcept {
        Timer *self = static_cast<Timer *>(t->data);
        self->callback_(*self);
    }
    tl_timer timer_;
    detail::Callback<Timer &> callback_;
};

/* An fd watcher; the callback receives the Io and TL_READ|TL_WRITE|... bits. */
class Io : private detail::HandleBase {
public:
    template <class F>
    Io(Loop &loop, int fd, F &&callback) : HandleBase(loop, &Io::detach) {
        tl_io_init(&io_, fd, &Io::trampoline, this);
        callback_.set(std::forward<F>(callback));
    }
    ~Io() { tl_io_stop(raw(), &io_); }

    /* Starts watching, or changes the events of an active watcher. */
    void start(unsigned events) { detail::check(tl_io_start(raw(), &io_, events), "tl_io_start"); }
    void stop() noexcept { tl_io_stop(raw(), &io_); }
    void set_ref(bool ref) { detail::check(tl_io_set_ref(raw(), &io_, ref), "tl_io_set_ref"); }
    int fd() const noexcept { return io_.fd; }
    unsigned events() const noexcept { return io_.events; }

private:
    static void detach(HandleBase *h) noexcept {
        Io *self = static_cast<Io *>(h);
        tl_io_stop(self->raw(), &self->io_);
    }
    static void trampoline(tl_loop *, tl_io *w, unsigned revents) noexcept {
        Io *self = static_cast<Io *>(w->data);
        self->callback_(*self, revents);
    }
    tl_io io_;
    detail::Callback<Io &, unsigned> callback_;
};

/* A cross-thread wakeup: send() from any thread, the callback runs on the
 * loop. Started on construction; pending asyncs run in construction order. */
class Async : private detail::HandleBase {
public:
    template <class F>
    Async(Loop &loop, F &&callback) : HandleBase(loop, &Async::detach) {
        tl_async_init(&async_);
        callback_.set(std::forward<F>(callback));
        detail::check(tl_async_start(raw(), &async_, &Async::trampoline, this), "tl_async_start");
    }
    ~Async() { tl_async_stop(raw(), &async_); }

    /* Any thread; sends coalesce until the callback runs. */
    void send() { detail::check(tl_async_send(&async_), "tl_async_send"); }
    void set_ref(bool ref) {
        detail::check(tl_async_set_ref(raw(), &async_, ref), "tl_async_set_ref");
    }

private:
    static void detach(HandleBase *h) noexcept {
        Async *self = static_cast<Async *>(h);
        tl_async_stop(self->raw(), &self->async_);
    }
    static void trampoline(tl_loop *, tl_async *a) noexcept {
        Async *self = static_cast<Async *>(a->data);
        self->callback_(*self);
    }
    tl_async async_;
    detail::Callback<Async &> callback_;
};

/* A signal watcher (signalfd), started on construction; the callback receives
 * the Signal and the signal number, like the other handles (a callable that
 * takes only the number is accepted too). */
class Signal : private detail::HandleBase {
public:
    template <class F>
    Signal(Loop &loop, int signo, F &&callback) : HandleBase(loop, &Signal::detach) {
        tl_signal_init(&signal_);
        if constexpr (std::is_invocable_v<F &, Signal &, int>) {
            callback_.set(std::forward<F>(callback));
        } else {
            static_assert(std::is_invocable_v<F &, int>,
                          "a Signal callback takes (Signal &, int) or (int)");
            callback_.set([f = std::forward<F>(callback)](Signal &, int s) mutable { f(s); });
        }
        detail::check(tl_signal_start(raw(), &signal_, signo, &Signal::trampoline, this),
                      "tl_signal_start");
    }
    ~Signal() { tl_signal_stop(raw(), &signal_); }

    void stop() noexcept { tl_signal_stop(raw(), &signal_); }
    void set_ref(bool ref) {
        detail::check(tl_signal_set_ref(raw(), &signal_, ref), "tl_signal_set_ref");
    }
    int signo() const noexcept { return signal_.signo; }

private:
    static void detach(HandleBase *h) noexcept {
        Signal *self = static_cast<Signal *>(h);
        tl_signal_stop(self->raw(), &self->signal_);
    }
    static void trampoline(tl_loop *, tl_signal *s, int signo) noexcept {
        Signal *self = static_cast<Signal *>(s->data);
        self->callback_(*self, signo);
    }
    tl_signal signal_;
    detail::Callback<Signal &, int> callback_;
};

/* A loop hook (TL_HOOK_PREPARE, TL_HOOK_CHECK or TL_HOOK_IDLE; see
 * tickloop.h for where each runs); the callback receives the Hook. Not
 * started on construction. */
class Hook : private detail::HandleBase {
public:
    template <class F>
    Hook(Loop &loop, tl_hook_kind kind, F &&callback) : HandleBase(loop, &Hook::detach) {
        tl_hook_init(&hook_, kind, &Hook::trampoline, this);
        callback_.set(std::forward<F>(callback));
    }
    ~Hook() { tl_hook_stop(raw(), &hook_); }

    void start() { detail::check(tl_hook_start(raw(), &hook_), "tl_hook_start"); }
    void stop() noexcept { tl_hook_stop(raw(), &hook_); }
    void set_ref(bool ref) {
        detail::check(tl_hook_set_ref(raw(), &hook_, ref), "tl_hook_set_ref");
    }
    bool active() const noexcept { return tl_hook_active(&hook_) != 0; }

private:
    static void detach(HandleBase *h) noexcept {
        Hook *self = static_cast<Hook *>(h);
        tl_hook_stop(self->raw(), &self->hook_);
    }
    static void trampoline(tl_loop *, tl_hook *h) noexcept {
        Hook *self = static_cast<Hook *>(h->data);
        self->callback_(*self);
    }
    tl_hook hook_;
    detail::Callback<Hook &> callback_;
};

/* One write of a Stream (tl_write_req): owned by the caller, reusable once
 * its callback has run; it and the bytes it names must stay valid until
 * then. The callback gets the request and the status (0, -EPIPE, ...,
 * -ECANCELED when the stream closed first). */
class WriteRequest {
public:
    WriteRequest() = default;
    template <class F>
    explicit WriteRequest(F &&callback) {
        callback_.set(std::forward<F>(callback));
    }
    WriteRequest(const WriteRequest &) = delete;
    WriteRequest &operator=(const WriteRequest &) = delete;

    template <class F>
    void on_done(F &&callback) {
        callback_.set(std::forward<F>(callback));
    }

private:
    friend class Stream;
    static void trampoline(tl_loop *, tl_write_req *req, int status) noexcept {
        WriteRequest *self = static_cast<WriteRequest *>(req->data);
        self->callback_(*self, status);
    }
    tl_write_req req_{};
    struct iovec iov_ {};
    detail::Callback<WriteRequest &, int> callback_;
};

/* A socket whose reads and writes the loop performs (tl_stream): connected,
 * or connected by connect().
 * It owns fd: close() closes it from the loop, and so does the destructor
 * of a Stream still open (run the loop afterwards so that the close
 * finishes before the Loop is destroyed). The read callback gets the Stream,
 * the bytes (valid during the call) and n: > 0 bytes, 0 EOF, < 0 -errno. The
 * C handle lives on the heap (one allocation per Stream, none per read or
 * write), so a close that finishes after the Stream is gone is safe. */
class Stream : private detail::HandleBase {
public:
    template <class F>
    Stream(Loop &loop, int fd, F &&on_read)
        : HandleBase(loop, &Stream::detach), stream_(new tl_stream) {
        tl_stream_init(stream_, fd, this);
        fd_ = fd;
        on_read_.set(std::forward<F>(on_read));
    }
    ~Stream() { release(); }

    void read_start() {
        detail::check(tl_stream_read_start(raw(), stream_, &Stream::read_trampoline),
                      "tl_stream_read_start");
    }
    void read_stop() { detail::check(tl_stream_read_stop(raw(), stream_), "tl_stream_read_stop"); }
    /* Queues len bytes at data after the writes queued before. */
    void write(WriteRequest &req, const void *data, std::size_t len) {
        req.iov_.iov_base = const_cast<void *>(data);
        req.iov_.iov_len = len;
        write(req, &req.iov_, 1);
    }
    /* The iovecs stay the caller's until req's callback. */
    void write(WriteRequest &req, const struct iovec *iov, int iovcnt) {
        req.req_.data = &req;
        detail::check(
            tl_stream_write(raw(), stream_, &req.req_, iov, iovcnt, &WriteRequest::trampoline),
            "tl_stream_write");
    }
    std::size_t write_queue_size() const noexcept { return tl_stream_write_queue_size(stream_); }
    /* Connects the Stream's socket (fresh, unconnected) to addr; then
       on_connect(*this, status) runs once from the loop: 0, -errno, or
       -ECANCELED when the Stream was closed first. read_start() and write()
       may come before it. */
    template <class F>
    void connect(const struct sockaddr *addr, socklen_t addrlen, F &&on_connect) {
        on_connect_.set(std::forward<F>(on_connect));
        detail::check(tl_stream_connect(raw(), stream_, addr, addrlen, &Stream::connect_trampoline),
                      "tl_stream_connect");
    }
    /* Half-closes once the writes queued before it went out; then
       on_shutdown(*this, status) runs from the loop. Reading goes on. */
    template <class F>
    void shutdown(F &&on_shutdown) {
        on_shutdown_.set(std::forward<F>(on_shutdown));
        detail::check(tl_stream_shutdown(raw(), stream_, &Stream::shutdown_trampoline),
                      "tl_stream_shutdown");
    }
    /* Closes from the loop: queued writes end with -ECANCELED, then the fd
       is closed, then on_close(*this) runs (it may destroy the Stream). */
    template <class F>
    void close(F &&on_close) {
        on_close_.set(std::forward<F>(on_close));
        detail::check(tl_stream_close(raw(), stream_, &Stream::close_trampoline),
                      "tl_stream_close");
        closing_ = true;
    }
    void close() {
        close([](Stream &) {});
    }
    void set_ref(bool ref) {
        detail::check(tl_stream_set_ref(raw(), stream_, ref), "tl_stream_set_ref");
    }
    int fd() const noexcept { return fd_; }

private:
    /* Hands the C handle to the loop's close, which frees it. */
    void release() noexcept {
        if (!stream_) return;    /* closed, and the handle freed */
        stream_->data = nullptr; /* no callback reaches this object any more */
        tl_loop *loop = raw();
        if (!closing_ && !(loop && tl_stream_close(loop, stream_, &Stream::close_trampoline) == 0))
            delete stream_; /* never bound, or its loop is gone */
        stream_ = nullptr;
    }
    static void detach(HandleBase *h) noexcept { static_cast<Stream *>(h)->release(); }
    static void read_trampoline(tl_loop *, tl_stream *s, const void *buf, ptrdiff_t n) noexcept {
        Stream *self = static_cast<Stream *>(s->data);
        if (self) self->on_read_(*self, buf, n);
    }
    static void connect_trampoline(tl_loop *, tl_stream *s, int status) noexcept {
        Stream *self = static_cast<Stream *>(s->data);
        if (self) self->on_connect_(*self, status);
    }
    static void shutdown_trampoline(tl_loop *, tl_stream *s, int status) noexcept {
        Stream *self = static_cast<Stream *>(s->data);
        if (self) self->on_shutdown_(*self, status);
    }
    static void close_trampoline(tl_loop *, tl_stream *s) noexcept {
        Stream *self = static_cast<Stream *>(s->data);
        delete s;
        if (!self) return; /* the Stream went first */
        self->stream_ = nullptr;
        self->on_close_(*self); /* may destroy self */
    }

    tl_stream *stream_;
    int fd_;
    bool closing_ = false;
    detail::Callback<Stream &, const void *, ptrdiff_t> on_read_;
    detail::Callback<Stream &> on_close_;
    detail::Callback<Stream &, int> on_connect_;
    detail::Callback<Stream &, int> on_shutdown_;
};

/* Accepts connections on a listening socket (tl_listener), started on
 * construction; the socket stays the caller's. The callback gets the
 * Listener and the new fd (non-blocking, close-on-exec, now the callback's),
 * or a negative errno such as -EMFILE (accepting pauses, then resumes). */
class Listener : private detail::HandleBase {
public:
    template <class F>
    Listener(Loop &loop, int fd, F &&on_accept) : HandleBase(loop, &Listener::detach) {
        callback_.set(std::forward<F>(on_accept));
        detail::check(tl_listener_start(raw(), &listener_, fd, &Listener::trampoline, this),
                      "tl_listener_start");
    }
    ~Listener() { tl_listener_stop(raw(), &listener_); }

    void stop() noexcept { tl_listener_stop(raw(), &listener_); }
    void set_ref(bool ref) {
        detail::check(tl_listener_set_ref(raw(), &listener_, ref), "tl_listener_set_ref");
    }
    int fd() const noexcept { return listener_.fd; }

private:
    static void detach(HandleBase *h) noexcept {
        Listener *self = static_cast<Listener *>(h);
        tl_listener_stop(self->raw(), &self->listener_);
    }
    static void trampoline(tl_loop *, tl_listener *l, int fd) noexcept {
        Listener *self = static_cast<Listener *>(l->data);
        self->callback_(*self, fd);
    }
    tl_listener listener_{};
    detail::Callback<Listener &, int> callback_;
};

} // namespace tickloop

#endif /* TICKLOOP_TICKLOOP_HPP */
