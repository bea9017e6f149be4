// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The network benchmark's probe targets run in a child process (this test
// binary re-executed), so the CPU and memory measured are the engine's alone.
const benchServerEnv = "PROBESHIM_BENCH_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(benchServerEnv) != "" {
		serveBenchTargets()
		return
	}
	if os.Getenv(hostileServerEnv) != "" {
		serveHostileTargets()
		return
	}
	os.Exit(m.Run())
}

// Several ports of each kind spread the loopback 4-tuples.
const benchPorts = 8

// serveBenchTargets listens on loopback, prints "http p1,p2,... tcp p1,..."
// and serves until stdin closes.
func serveBenchTargets() {
	raiseFDLimit()
	listen := func() (net.Listener, string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return ln, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	// A minimal HTTP/1.1 responder: the targets should cost as little CPU as
	// possible, since they share the machine with the engine being measured.
	const response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
	serveHTTP := func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 1024)
		var got []byte
		for !bytes.Contains(got, []byte("\r\n\r\n")) {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			got = append(got, buf[:n]...)
		}
		_, _ = c.Write([]byte(response))
	}
	accept := func(ln net.Listener, serve func(net.Conn)) {
		for {
			c, err := ln.Accept()
			if err != nil {
				continue
			}
			if serve == nil {
				c.Close()
				continue
			}
			go serve(c)
		}
	}
	var httpPorts, tcpPorts []string
	for i := 0; i < benchPorts; i++ {
		ln, port := listen()
		httpPorts = append(httpPorts, port)
		go accept(ln, serveHTTP)
		ln, port = listen()
		tcpPorts = append(tcpPorts, port)
		go accept(ln, nil)
	}
	fmt.Printf("http %s tcp %s\n", strings.Join(httpPorts, ","), strings.Join(tcpPorts, ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// raiseFDLimit lifts the soft open-files limit to the hard one.
func raiseFDLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

type allRunning struct{ st ContainerStatus }

func (a allRunning) Container(string, string) (ContainerStatus, bool) { return a.st, true }

type noopExec struct{}

func (noopExec) Exec(context.Context, string, []string, time.Duration) (ExecResult, error) {
	return ExecResult{}, nil
}

// BenchmarkEngine runs 10,000 workers (PROBESHIM_BENCH_WORKERS) at a 1 s
// period and reports CPU per 1,000 probes, memory per worker and how late
// probes start against their schedule.
//   - http+tcp: half HTTP, half TCP probes against loopback servers in a
//     child process.
//   - noop-exec: exec probes answered at once by a fake runner: the engine's
//     own cost (scheduling, state machine, results, metrics) without the
//     network.
//
// PROBESHIM_BENCH_MIX=http or tcp runs one kind of network probe only. The
// machine's load average is printed too: on a shared machine the network
// case measures the neighbours as much as the engine.
func BenchmarkEngine(b *testing.B) {
	workers := 10000
	if v, err := strconv.Atoi(os.Getenv("PROBESHIM_BENCH_WORKERS")); err == nil && v > 0 {
		workers = v
	}
	raiseFDLimit()
	b.Run("http+tcp", func(b *testing.B) {
		httpPorts, tcpPorts, stop := startBenchTargets(b)
		defer stop()
		mix := os.Getenv("PROBESHIM_BENCH_MIX") // "http" or "tcp" for one kind only
		benchEngine(b, workers, nil, func(i int, spec *corev1.Probe) {
			if mix == "http" || (mix != "tcp" && i%2 == 0) {
				port, _ := strconv.Atoi(httpPorts[i%benchPorts])
				spec.HTTPGet = &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(int32(port))}
			} else {
				port, _ := strconv.Atoi(tcpPorts[i%benchPorts])
				spec.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}
			}
		})
	})
	b.Run("noop-exec", func(b *testing.B) {
		benchEngine(b, workers, noopExec{}, func(i int, spec *corev1.Probe) {
			spec.Exec = &corev1.ExecAction{Command: []string{"true"}}
		})
	})
}

func startBenchTargets(b *testing.B) (httpPorts, tcpPorts []string, stop func()) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	child := exec.Command(self)
	child.Env = append(os.Environ(), benchServerEnv+"=1")
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	stop = func() {
		stdin.Close()
		_ = child.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if f := strings.Fields(line); err != nil || len(f) != 4 {
		stop()
		b.Fatalf("bench targets: %q %v", line, err)
	}
	f := strings.Fields(line)
	return strings.Split(f[1], ","), strings.Split(f[3], ","), stop
}

func benchEngine(b *testing.B, workers int, execer Execer, handler func(i int, spec *corev1.Probe)) {
	const (
		warmup = 2 * time.Second // the first Sync spreads probes over 1 s
		window = 5 * time.Second
	)
	opts := []Option{WithRegisterer(prometheus.NewRegistry()), WithPodRegisterer(prometheus.NewRegistry()), WithLogger(slog.New(slog.DiscardHandler))}
	if execer != nil {
		opts = append(opts, WithExecer(execer))
	}
	m, err := NewManager(allRunning{ContainerStatus{ID: "c", Running: true, StartedAt: time.Now()}}, opts...)
	if err != nil {
		b.Fatal(err)
	}

	var (
		measuring atomic.Bool
		onTime    atomic.Int64
		overran   atomic.Int64
		late      = make([]int64, 2*workers*int(window/time.Second))
	)
	m.onStart = func(d time.Duration, over bool) {
		if !measuring.Load() {
			return
		}
		if over {
			// Late because the previous probe outlasted its period (a slow
			// target), not because the engine started it late.
			overran.Add(1)
			return
		}
		if i := onTime.Add(1) - 1; i < int64(len(late)) {
			late[i] = int64(d)
		}
	}

	desired := make([]Desired, workers)
	for i := range desired {
		uid := fmt.Sprintf("pod-%05d", i)
		spec := corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1}
		handler(i, &spec)
		desired[i] = Desired{
			Key:       Key{PodUID: uid, Container: "app", Probe: "p"},
			Pod:       PodRef{UID: uid, Namespace: "bench", Name: uid, IP: "127.0.0.1"},
			Spec:      spec,
			ProbeType: "custom",
		}
	}

	runtime.GC()
	debug.FreeOSMemory()
	rss0, heap0 := rssBytes(), heapInUse()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = m.Run(ctx)
		close(done)
	}()
	go func() {
		for range m.Updates() {
		}
	}()
	m.Sync(desired)
	time.Sleep(warmup) // the benchmark measures wall-clock behaviour: first rounds and jitter pass

	b.ResetTimer()
	u0, s0 := cpuTimes()
	measuring.Store(true)
	time.Sleep(window) // measures: CPU, memory and start lateness over the window
	measuring.Store(false)
	u1, s1 := cpuTimes()
	b.StopTimer()
	cpuSys := s1 - s0
	cpu := u1 - u0 + cpuSys
	rss := rssBytes()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.GC()
	heap := heapInUse()
	cancel()
	<-done
	runtime.GC() // every worker has probed, none is running
	idle := heapInUse()
	runtime.KeepAlive(m)

	n := min(onTime.Load(), int64(len(late)))
	if n == 0 {
		b.Fatal("no probe started on time")
	}
	probes := n + overran.Load()
	lat := late[:n]
	slices.Sort(lat)
	p50, p99 := time.Duration(lat[len(lat)/2]), time.Duration(lat[len(lat)*99/100])
	var ok, failed int
	for _, u := range m.Snapshot() {
		switch u.Result {
		case Success:
			ok++
		case Failure:
			failed++
		}
	}
	perWorker := func(v, base uint64) float64 { return (float64(v) - float64(base)) / float64(workers) / 1024 }
	cpuPer1k := cpu.Seconds() / float64(probes) * 1000
	b.ReportMetric(cpuPer1k, "cpu-s/1000probes")
	b.ReportMetric(perWorker(rss, rss0), "rss-KiB/worker")
	b.ReportMetric(perWorker(heap, heap0), "heap-KiB/worker")
	b.ReportMetric(perWorker(idle, heap0), "idle-heap-KiB/worker")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-late-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-late-ms")
	b.ReportMetric(float64(probes)/window.Seconds(), "probes/s")
	b.ReportMetric(float64(overran.Load())/float64(probes)*100, "%overran")

	load, _ := os.ReadFile("/proc/loadavg")
	name := b.Name()
	fmt.Printf("%s: %d workers, period 1s: %d probes in %v (%.0f/s); latest results %d Success, %d Failure; machine load %s\n",
		name, workers, probes, window, float64(probes)/window.Seconds(), ok, failed, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("%s: CPU %.3f s per 1,000 probes (%.0f%% of a core, %.0f%% of it in the kernel)\n",
		name, cpuPer1k, cpu.Seconds()/window.Seconds()*100, cpuSys.Seconds()/cpu.Seconds()*100)
	fmt.Printf("%s: memory per worker: RSS %.2f KiB, live heap %.2f KiB while probing, %.2f KiB idle (RSS %.1f MiB over the baseline: heap %.1f MiB in use, %.1f MiB free not yet returned, stacks %.1f MiB)\n",
		name, perWorker(rss, rss0), perWorker(heap, heap0), perWorker(idle, heap0),
		(float64(rss)-float64(rss0))/(1<<20), float64(ms.HeapInuse)/(1<<20), float64(ms.HeapIdle-ms.HeapReleased)/(1<<20), float64(ms.StackInuse)/(1<<20))
	fmt.Printf("%s: start lateness p50 %v, p99 %v, max %v; %.1f%% of probes started late because the previous one overran its period (targets: p99 < 50ms, < 4 KiB/worker)\n",
		name, p50.Round(time.Microsecond), p99.Round(time.Microsecond), time.Duration(lat[len(lat)-1]).Round(time.Microsecond),
		float64(overran.Load())/float64(probes)*100)
}

// cpuTimes returns the process's user and system CPU time.
func cpuTimes() (user, sys time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// rssBytes reads VmRSS from /proc; 0 where there is no /proc.
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
