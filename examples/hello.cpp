/* SPDX-License-Identifier: MIT */
// hello.cpp: the smallest tickloop program with the C++ wrapper.
//
// Shows a repeating timer with a lambda, an fd watcher on a pipe the timer
// writes to, a signal watcher (SIGINT stops early: exit 130, the shell's
// convention) and a one-shot timer that ends the program after half a
// second. A failure (an unknown --timers name, say) is one line on stderr,
// the library's account of it, and exit 1.
//
//   hello_cpp [--io epoll|io_uring|auto] [--timers heap2|heap4|wheel|hwheel] [--help]
#include <csignal>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <tickloop/tickloop.hpp>

using namespace std::chrono_literals;

int main(int argc, char **argv) {
    tickloop::Options options;
    for (int i = 1; i < argc; ++i) {
        const char *val = i + 1 < argc ? argv[i + 1] : nullptr;
        if (val && std::strcmp(argv[i], "--timers") == 0) {
            options.timers = argv[++i];
        } else if (val && std::strcmp(argv[i], "--io") == 0 && std::strcmp(val, "epoll") == 0) {
            options.io = TL_IO_EPOLL;
            ++i;
        } else if (val && std::strcmp(argv[i], "--io") == 0 && std::strcmp(val, "io_uring") == 0) {
            options.io = TL_IO_URING;
            ++i;
        } else if (val && std::strcmp(argv[i], "--io") == 0 && std::strcmp(val, "auto") == 0) {
            options.io = TL_IO_AUTO;
            ++i;
        } else {
            bool help = std::strcmp(argv[i], "--help") == 0;
            if (help) {
            } else if (std::strcmp(argv[i], "--io") != 0 && std::strcmp(argv[i], "--timers") != 0)
                std::fprintf(stderr, "%s: unknown option: %s\n", argv[0], argv[i]);
            else if (!val)
                std::fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[i]);
            else
                std::fprintf(stderr, "%s: bad value for %s: %s\n", argv[0], argv[i], val);
            std::fprintf(help ? stdout : stderr,
                         "usage: %s [--io epoll|io_uring|auto] [--timers NAME] [--help]\nA timer, "
                         "a pipe watcher and a SIGINT watcher for 0.5 s; Ctrl-C stops it early "
                         "(exit status 130) (tickloop %s).\n",
                         argv[0], tl_version());
            return help ? 0 : 2;
        }
    }
    int fds[2];
    if (pipe(fds) < 0) return 1;
    try {
        tickloop::Loop loop(options);
        int ticks = 0, reads = 0;
        bool interrupted = false;
        tickloop::Timer tick(loop, [&](tickloop::Timer &) {
            ++ticks;
            if (write(fds[1], "x", 1) != 1) std::perror("write");
        });
        tickloop::Io reader(loop, fds[0], [&](tickloop::Io &io, unsigned revents) {
            char buf[64];
            if ((revents & TL_READ) && read(io.fd(), buf, sizeof buf) > 0) ++reads;
        });
        tickloop::Timer done(loop, [&](tickloop::Timer &) { loop.stop(); });
        tickloop::Signal intr(loop, SIGINT, [&](int) {
            interrupted = true;
            loop.stop();
        });

        tick.start(10ms, 50ms);
        reader.start(TL_READ);
        done.start(500ms);
        std::printf("hello_cpp: running for 0.5 s on %s and %s\n", loop.timers_name(),
                    loop.io_name());
        std::fflush(stdout);
        loop.run();
        std::printf("%-8s io=%-8s ticks=%d reads=%d\n", loop.timers_name(), loop.io_name(), ticks,
                    reads);
        close(fds[0]);
        close(fds[1]);
        if (interrupted) {
            std::printf("hello_cpp: interrupted by SIGINT\n");
            return 128 + SIGINT;
        }
        return ticks >= 9 && reads >= 1 ? 0 : 1;
    } catch (const std::system_error &e) {
        std::fprintf(stderr, "hello_cpp: %s\n", e.what());
        return 1;
    }
}
