// SPDX-License-Identifier: MIT

// peers.go: the workloads of peers.cc (delayed tasks, heartbeats; see the
// top of that file) on Go's runtime timers, printing the same
// "peers key=value ..." line. Same sizes, same seeded generator
// (splitmix64), so the same delays, cancel order and restart victims.
//
// Go's idioms: a task is time.AfterFunc (its function runs in a goroutine of
// its own when the timer fires), a cancel is Timer.Stop, a restart is
// Timer.Reset on the live timer. The timers live in the runtime's per-P
// heaps; run.sh runs this with GOMAXPROCS=1 and with the default (one P per
// CPU).
//
// Measured as in peers.cc: process CPU from getrusage(RUSAGE_SELF) (user +
// sys of every thread of the runtime, GC included), wake-ups as the
// process's voluntary context switches (ru_nvcsw) over the fire phase, RSS
// from /proc/self/statm. Deadline: the monotonic clock read just before
// AfterFunc plus the delay; the runtime reads the same clock inside
// AfterFunc a few ns later, so lateness is overstated by those ns and an
// early fire is a real one. The clock read costs about 40 ns per timer of
// the schedule phase.
//
// Usage (run.sh builds and runs it): peers-go delayed|heartbeat
// The row is labelled go-p1 with GOMAXPROCS=1 in the environment, else
// go-default.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	ms               = int64(time.Millisecond)
	delayedN         = 1000000
	delayedSurvivors = 100000
	delayMin         = 3100 * ms
	delaySpan        = 1900 * ms
	delayedSeed      = 0x64656c61796564
	heartbeatN       = 1000000
	restarts         = 10000000
	heartbeat        = 30 * time.Second
	heartbeatSeed    = 0x68656172746265
)

// splitmix64, bit for bit the generator of benches/latency/latency.h.
type rng struct{ state uint64 }

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
func (r *rng) unit() float64         { return float64(r.next()>>11) * 0x1.0p-53 }
func (r *rng) below(n uint64) uint64 { return uint64(r.unit() * float64(n)) }

// The monotonic clock, in ns since the program started.
var base = time.Now()

func mono() int64 { return int64(time.Since(base)) }

type snap struct{ wall, cpu, nvcsw, rss int64 }

func takeSnap() snap {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	cpu := (ru.Utime.Sec+ru.Stime.Sec)*1e9 + (ru.Utime.Usec+ru.Stime.Usec)*1e3
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		panic(err)
	}
	resident, _ := strconv.ParseInt(strings.Fields(string(statm))[1], 10, 64)
	return snap{mono(), cpu, ru.Nvcsw, resident * int64(os.Getpagesize())}
}

var line = []string{"peers"}

func add(key string, v interface{}) { line = append(line, fmt.Sprintf("%s=%v", key, v)) }
func addPhase(name string, a, b snap) {
	add(name+"_cpu_ns", b.cpu-a.cpu)
	add(name+"_wall_ns", b.wall-a.wall)
}

func label() string {
	if os.Getenv("GOMAXPROCS") == "1" {
		return "go-p1"
	}
	return "go-default"
}

func nearestRank(sorted []int64, p float64) int64 {
	k := int(float64(len(sorted))*p + 0.999999999)
	if k < 1 {
		k = 1
	}
	return sorted[k-1]
}

func max0(v int64) int64 {
	if v < 0 {
		return 0
	}
	return v
}

func delayed() int {
	const n, cancelled = delayedN, delayedN - delayedSurvivors
	r := rng{delayedSeed}
	delay := make([]int64, n)
	deadline := make([]int64, n)
	fireAt := make([]int64, n)
	for i := range delay {
		delay[i] = delayMin + int64(r.below(uint64(delaySpan)))
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	for i := n - 1; i > 0; i-- {
		j := r.below(uint64(i + 1))
		order[i], order[j] = order[j], order[i]
	}
	var done sync.WaitGroup
	done.Add(delayedSurvivors)

	s0 := takeSnap()
	timers := make([]*time.Timer, n)
	for i := range timers {
		i := i
		deadline[i] = mono() + delay[i]
		timers[i] = time.AfterFunc(time.Duration(delay[i]), func() {
			fireAt[i] = mono()
			done.Done()
		})
	}
	s1 := takeSnap()
	refused := 0
	for k := 0; k < cancelled; k++ {
		if !timers[order[k]].Stop() {
			refused++
		}
	}
	s2 := takeSnap()
	done.Wait()
	s3 := takeSnap()

	first := deadline[0]
	for _, d := range deadline {
		if d < first {
			first = d
		}
	}
	late := make([]int64, 0, delayedSurvivors)
	ticks := make([]int64, 0, delayedSurvivors)
	cancelledFired, early, fired := 0, 0, 0
	for k, i := range order {
		if k < cancelled {
			if fireAt[i] != 0 {
				cancelledFired++
			}
			continue
		}
		l := fireAt[i] - deadline[i]
		late = append(late, l)
		ticks = append(ticks, (deadline[i]+ms-1)/ms)
		if fireAt[i] != 0 {
			fired++
		}
		if l < 0 {
			early++
		}
	}
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	sort.Slice(ticks, func(a, b int) bool { return ticks[a] < ticks[b] })
	dueTicks := 0
	for j := range ticks {
		if j == 0 || ticks[j] != ticks[j-1] {
			dueTicks++
		}
	}
	var gc runtime.MemStats
	runtime.ReadMemStats(&gc)

	add("workload", "delayed")
	add("lib", label())
	add("n", n)
	addPhase("schedule", s0, s1)
	addPhase("cancel", s1, s2)
	addPhase("fire", s2, s3)
	add("total_cpu_ns", s3.cpu-s0.cpu)
	add("bytes_per_timer", (s1.rss-s0.rss)/n)
	add("fired", fired)
	add("late_p50_ns", max0(nearestRank(late, .5)))
	add("late_p99_ns", max0(nearestRank(late, .99)))
	add("late_max_ns", max0(late[len(late)-1]))
	add("early", early)
	add("wakeups", s3.nvcsw-s2.nvcsw)
	add("due_ticks", dueTicks)
	add("ticks", "-")
	add("loop_timer_wakeups", "-")
	add("loop_iterations", "-")
	add("cancel_margin_ns", max0(first-s2.wall))
	add("gc_cycles", gc.NumGC)
	fmt.Println(strings.Join(line, " "))
	if s2.wall >= first {
		fmt.Fprintln(os.Stderr, "go: the cancel phase ended after the first deadline")
		return 1
	}
	if fired != delayedSurvivors || cancelledFired != 0 || refused != 0 {
		fmt.Fprintf(os.Stderr, "go: %d fired, %d cancelled ones fired, %d stops refused\n",
			fired, cancelledFired, refused)
		return 1
	}
	runtime.KeepAlive(timers)
	return 0
}

func heartbeatRun() int {
	const n = heartbeatN
	r := rng{heartbeatSeed}
	victim := make([]int32, restarts)
	for i := range victim {
		victim[i] = int32(r.below(n))
	}
	// A connection's idle timeout; it runs only for a connection left
	// without a restart for 30 s, when the restart phase lasts that long.
	var fired int64
	idle := func() { atomic.AddInt64(&fired, 1) }

	s0 := takeSnap()
	timers := make([]*time.Timer, n)
	for i := range timers {
		timers[i] = time.AfterFunc(heartbeat, idle)
	}
	s1 := takeSnap()
	for _, v := range victim {
		timers[v].Reset(heartbeat)
	}
	s2 := takeSnap()
	var gc runtime.MemStats
	runtime.ReadMemStats(&gc)

	add("workload", "heartbeat")
	add("lib", label())
	add("n", n)
	addPhase("schedule", s0, s1)
	addPhase("restart", s1, s2)
	add("restarts", restarts)
	add("bytes_per_timer", (s1.rss-s0.rss)/n)
	add("fired", atomic.LoadInt64(&fired))
	add("gc_cycles", gc.NumGC)
	fmt.Println(strings.Join(line, " "))
	for _, t := range timers {
		t.Stop()
	}
	return 0
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: peers-go delayed|heartbeat")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "delayed":
		os.Exit(delayed())
	case "heartbeat":
		os.Exit(heartbeatRun())
	default:
		fmt.Fprintln(os.Stderr, "unknown workload", os.Args[1])
		os.Exit(2)
	}
}
