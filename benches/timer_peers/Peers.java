// SPDX-License-Identifier: MIT
/*
 * Peers.java: the workloads of peers.cc (delayed tasks, heartbeats; see the
 * top of that file) on Netty's io.netty.util.HashedWheelTimer, printing the
 * same "peers key=value ..." line. Same sizes, same seeded generator
 * (splitmix64), so the same delays, cancel order and restart victims.
 *
 * Netty's idioms: a task is a TimerTask scheduled with newTimeout; a cancel
 * is Timeout.cancel(); a restart is cancel() + newTimeout() (a Timeout cannot
 * be moved). The timer's worker thread does the wheel's work asynchronously:
 * newTimeout and cancel only enqueue, and the worker moves up to 100,000
 * queued timeouts into the wheel per tick and unlinks the cancelled ones.
 * So the heartbeat's restart phase ends when the worker has caught up (a
 * timeout of delay 0 queued after the last restart has fired), and the per-phase split of the delayed
 * workload is approximate (the worker's share of a phase may land in the
 * next); the totals are exact.
 *
 * Measured as in peers.cc: process CPU from getrusage(RUSAGE_SELF) (user +
 * sys of every thread: the worker, GC and JIT threads included; called
 * through the JDK 17 foreign linker, as the JDK's own process CPU time has
 * only 10 ms resolution), wake-ups as the process's voluntary context
 * switches (ru_nvcsw) over the fire phase, RSS from /proc/self/statm.
 * Deadline: System.nanoTime() (CLOCK_MONOTONIC) read just before newTimeout
 * plus the delay; Netty reads the same clock inside newTimeout a few ns
 * later, so lateness is overstated by those ns and an early fire is a real
 * one. The clock read costs about 25 ns per timer of the schedule phase.
 * JIT compilation and GC are part of the process CPU; their own times are
 * printed as jit_ms and gc_ms.
 *
 * Usage (run.sh compiles and runs it):
 *   java --add-modules jdk.incubator.foreign --enable-native-access=ALL-UNNAMED
 *        -cp CLASSES:/usr/share/java/netty-common.jar Peers WORKLOAD TICK_MS
 * WORKLOAD: delayed | heartbeat; TICK_MS: the tick (1, or Netty's default
 * 100); the wheel has Netty's default 512 buckets.
 */
import io.netty.util.HashedWheelTimer;
import io.netty.util.Timeout;
import io.netty.util.TimerTask;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodType;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import jdk.incubator.foreign.CLinker;
import jdk.incubator.foreign.FunctionDescriptor;
import jdk.incubator.foreign.MemoryAddress;
import jdk.incubator.foreign.MemorySegment;
import jdk.incubator.foreign.ResourceScope;

public final class Peers {
    static final long MS = 1_000_000L, SEC = 1000 * MS;
    static final int DELAYED_N = 1_000_000, DELAYED_SURVIVORS = 100_000;
    static final long DELAY_MIN = 3100 * MS, DELAY_SPAN = 1900 * MS;
    static final long DELAYED_SEED = 0x64656c61796564L;
    static final int HEARTBEAT_N = 1_000_000, RESTARTS = 10_000_000;
    static final long HEARTBEAT = 30 * SEC;
    static final long HEARTBEAT_SEED = 0x68656172746265L;
    static final int WHEEL = 512;

    /* splitmix64, bit for bit the generator of benches/latency/latency.h. */
    static final class Rng {
        long state;
        Rng(long seed) { state = seed; }
        long next() {
            long z = (state += 0x9e3779b97f4a7c15L);
            z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
            z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
            return z ^ (z >>> 31);
        }
        double unit() { return (double) (next() >>> 11) * 0x1.0p-53; }
        long below(long n) { return (long) (unit() * (double) n); }
    }

    /* ------------------------------------------------------------------ */
    /* Process counters at phase boundaries                               */
    /* ------------------------------------------------------------------ */

    static final MethodHandle GETRUSAGE = CLinker.getInstance().downcallHandle(
            CLinker.systemLookup().lookup("getrusage").orElseThrow(),
            MethodType.methodType(int.class, int.class, MemoryAddress.class),
            FunctionDescriptor.of(CLinker.C_INT, CLinker.C_INT, CLinker.C_POINTER));
    static final MemorySegment RUSAGE =
            MemorySegment.allocateNative(144, ResourceScope.globalScope());
    static final long PAGE = 4096;

    static final class Snap {
        long wall, cpu, nvcsw, rss;
    }

    static Snap snap() {
        Snap s = new Snap();
        try {
            if ((int) GETRUSAGE.invokeExact(0 /* RUSAGE_SELF */, RUSAGE.address()) != 0)
                throw new IllegalStateException("getrusage failed");
            /* struct rusage on x86-64 Linux: ru_utime, ru_stime (timeval:
               two longs each), then 14 longs, the 13th of them ru_nvcsw. */
            long[] v = RUSAGE.toLongArray();
            s.cpu = (v[0] + v[2]) * SEC + (v[1] + v[3]) * 1000;
            s.nvcsw = v[16];
            String[] statm = Files.readString(Path.of("/proc/self/statm")).trim().split(" ");
            s.rss = Long.parseLong(statm[1]) * PAGE;
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
        s.wall = System.nanoTime();
        return s;
    }

    static final StringBuilder line = new StringBuilder("peers");
    static void add(String key, Object v) { line.append(' ').append(key).append('=').append(v); }
    static void addPhase(String name, Snap a, Snap b) {
        add(name + "_cpu_ns", b.cpu - a.cpu);
        add(name + "_wall_ns", b.wall - a.wall);
    }
    static void addRuntime() {
        add("jit_ms", ManagementFactory.getCompilationMXBean().getTotalCompilationTime());
        long gc = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans())
            gc += Math.max(0, b.getCollectionTime());
        add("gc_ms", gc);
    }

    static long nearestRank(long[] sorted, double p) {
        int k = (int) Math.ceil(p * sorted.length);
        return sorted[Math.max(k, 1) - 1];
    }

    /* ------------------------------------------------------------------ */
    /* The workloads                                                      */
    /* ------------------------------------------------------------------ */

    static HashedWheelTimer newTimer(long tickMs) {
        return new HashedWheelTimer(r -> {
            Thread t = new Thread(r, "hwt-worker");
            t.setDaemon(true);
            return t;
        }, tickMs, TimeUnit.MILLISECONDS, WHEEL);
    }

    static int delayed(long tickMs) throws InterruptedException {
        final int n = DELAYED_N, cancelled = DELAYED_N - DELAYED_SURVIVORS;
        Rng rng = new Rng(DELAYED_SEED);
        long[] delay = new long[n], deadline = new long[n];
        final long[] fireAt = new long[n];
        for (int i = 0; i < n; ++i) delay[i] = DELAY_MIN + rng.below(DELAY_SPAN);
        int[] order = new int[n];
        for (int i = 0; i < n; ++i) order[i] = i;
        for (int i = n - 1; i > 0; --i) {
            int j = (int) rng.below(i + 1);
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        final CountDownLatch done = new CountDownLatch(DELAYED_SURVIVORS);
        /* The application's task: records when it ran. */
        final class Task implements TimerTask {
            final int i;
            Task(int i) { this.i = i; }
            @Override public void run(Timeout t) {
                fireAt[i] = System.nanoTime();
                done.countDown();
            }
        }
        HashedWheelTimer timer = newTimer(tickMs);
        timer.start();

        Snap s0 = snap();
        Timeout[] handles = new Timeout[n];
        for (int i = 0; i < n; ++i) {
            deadline[i] = System.nanoTime() + delay[i];
            handles[i] = timer.newTimeout(new Task(i), delay[i], TimeUnit.NANOSECONDS);
        }
        Snap s1 = snap();
        int refused = 0;
        for (int k = 0; k < cancelled; ++k)
            if (!handles[order[k]].cancel()) ++refused;
        Snap s2 = snap();
        done.await();
        Snap s3 = snap();

        long first = Long.MAX_VALUE;
        for (int i = 0; i < n; ++i) first = Math.min(first, deadline[i]);
        long[] late = new long[DELAYED_SURVIVORS];
        long[] ticks = new long[DELAYED_SURVIVORS];
        int cancelledFired = 0, early = 0, fired = 0;
        for (int k = 0; k < n; ++k) {
            int i = order[k];
            if (k < cancelled) {
                if (fireAt[i] != 0) ++cancelledFired;
                continue;
            }
            int j = k - cancelled;
            late[j] = fireAt[i] - deadline[i];
            ticks[j] = (deadline[i] + MS - 1) / MS;
            if (fireAt[i] != 0) ++fired;
            if (late[j] < 0) ++early;
        }
        Arrays.sort(late);
        Arrays.sort(ticks);
        int dueTicks = 0;
        for (int j = 0; j < ticks.length; ++j)
            if (j == 0 || ticks[j] != ticks[j - 1]) ++dueTicks;

        add("workload", "delayed");
        add("lib", "netty-" + tickMs + "ms");
        add("n", n);
        addPhase("schedule", s0, s1);
        addPhase("cancel", s1, s2);
        addPhase("fire", s2, s3);
        add("total_cpu_ns", s3.cpu - s0.cpu);
        add("bytes_per_timer", (s1.rss - s0.rss) / n);
        add("fired", fired);
        add("late_p50_ns", Math.max(0, nearestRank(late, .5)));
        add("late_p99_ns", Math.max(0, nearestRank(late, .99)));
        add("late_max_ns", Math.max(0, late[late.length - 1]));
        add("early", early);
        add("wakeups", s3.nvcsw - s2.nvcsw);
        add("due_ticks", dueTicks);
        add("ticks", (s3.wall - s2.wall) / (tickMs * MS));
        add("loop_timer_wakeups", "-");
        add("loop_iterations", "-");
        add("cancel_margin_ns", Math.max(0, first - s2.wall));
        addRuntime();
        System.out.println(line);
        timer.stop();
        if (s2.wall >= first) {
            System.err.println("netty: the cancel phase ended after the first deadline");
            return 1;
        }
        if (fired != DELAYED_SURVIVORS || cancelledFired != 0 || refused != 0) {
            System.err.printf("netty: %d fired, %d cancelled ones fired, %d cancels refused%n",
                    fired, cancelledFired, refused);
            return 1;
        }
        return 0;
    }

    static int heartbeat(long tickMs) throws InterruptedException {
        final int n = HEARTBEAT_N;
        Rng rng = new Rng(HEARTBEAT_SEED);
        int[] victim = new int[RESTARTS];
        for (int i = 0; i < RESTARTS; ++i) victim[i] = (int) rng.below(n);
        final long[] fired = new long[1];
        /* The connection's idle-timeout task, one per connection, reused by
           every restart. It runs only for a connection left without a
           restart for 30 s, when the restart phase lasts that long. */
        final class Idle implements TimerTask {
            @Override public void run(Timeout t) {
                synchronized (fired) {
                    ++fired[0];
                }
            }
        }
        HashedWheelTimer timer = newTimer(tickMs);
        timer.start();

        Snap s0 = snap();
        Timeout[] handles = new Timeout[n];
        for (int i = 0; i < n; ++i)
            handles[i] = timer.newTimeout(new Idle(), HEARTBEAT, TimeUnit.NANOSECONDS);
        Snap s1 = snap();
        for (int i = 0; i < RESTARTS; ++i) {
            Timeout t = handles[victim[i]];
            t.cancel();
            handles[victim[i]] = timer.newTimeout(t.task(), HEARTBEAT, TimeUnit.NANOSECONDS);
        }
        /* The worker has caught up when a timeout queued after all of them
           fires: it reaches the wheel after every timeout queued before it,
           and the tick that expires it first unlinks every cancelled one.
           (pendingTimeouts() cannot tell: a cancel racing with the worker's
           expiry pass is counted off twice in this Netty version.) */
        CountDownLatch caughtUp = new CountDownLatch(1);
        timer.newTimeout(t -> caughtUp.countDown(), 0, TimeUnit.NANOSECONDS);
        caughtUp.await();
        Snap s2 = snap();

        add("workload", "heartbeat");
        add("lib", "netty-" + tickMs + "ms");
        add("n", n);
        addPhase("schedule", s0, s1);
        addPhase("restart", s1, s2);
        add("restarts", RESTARTS);
        add("bytes_per_timer", (s1.rss - s0.rss) / n);
        long f;
        synchronized (fired) {
            f = fired[0];
        }
        add("fired", f);
        addRuntime();
        System.out.println(line);
        timer.stop();
        return 0;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: Peers delayed|heartbeat TICK_MS");
            System.exit(2);
        }
        long tickMs = Long.parseLong(args[1]);
        int rc;
        if (args[0].equals("delayed"))
            rc = delayed(tickMs);
        else if (args[0].equals("heartbeat"))
            rc = heartbeat(tickMs);
        else {
            System.err.println("unknown workload " + args[0]);
            rc = 2;
        }
        System.exit(rc);
    }
}
