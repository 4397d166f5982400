/* SPDX-License-Identifier: MIT */
/*
 * peers.h: the adapters of every peer found by Meson (TL_BENCH_HAVE_*),
 * with tickloop's: TickloopOps, LibevOps, LibuvOps and AsioOps where built.
 * libevent's (ops_libevent.h) lives in executables of its own: Debian's
 * libev exports libevent-compatible symbols.
 */
#ifndef TICKLOOP_BENCHES_PEERS_H
#define TICKLOOP_BENCHES_PEERS_H

#include "ops_tickloop.h"

#if TL_BENCH_HAVE_LIBEV
#include "ops_libev.h"
#endif
#if TL_BENCH_HAVE_LIBUV
#include "ops_libuv.h"
#endif
#if TL_BENCH_HAVE_ASIO
#include "ops_asio.h"
#endif

#endif /* TICKLOOP_BENCHES_PEERS_H */
