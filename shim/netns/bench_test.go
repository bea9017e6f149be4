// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package netns

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The benchmarks compare a plain dial in the host namespace with a dial
// into a pod namespace, both to a listener on that namespace's 127.0.0.1, so
// the difference is the cost of entering and leaving the namespace. Run with
// a fixed count (-benchtime 3000x): every dial leaves a TIME_WAIT socket.
//
// Besides the Dialer (a stock of sockets made inside the namespace, a batch
// at a time by a goroutine that locks its thread and dies with it if it
// cannot return; the dial itself on the caller's goroutine), designs that
// were considered are measured:
//   - batch-N: the stock refilled N sockets at a time (batch-1 is the
//     previous design's cost: a goroutine handoff and two setns per dial);
//   - open-per-dial: opening the namespace path on every dial instead of
//     keeping it open;
//   - locked-pool: long-lived goroutines locked to their threads, each dial
//     handed to one (a handoff to a locked thread costs more than a new
//     goroutine);
//   - inline-unsafe: the dial on the caller's own goroutine and thread: the
//     lower bound, but a thread that failed to return could not be
//     discarded, so it is not used.

func dialClose(b *testing.B, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) {
	c, err := dial(context.Background(), "tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	c.Close()
}

func benchSetup(b *testing.B) (ns *testNS, hostAddr, nsAddr string) {
	ns = newTestNS(b)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	serve(b, hl, "")
	nl := listenIn(b, ns.path, "127.0.0.1:0", "")
	return ns, hl.Addr().String(), nl.Addr().String()
}

func BenchmarkDial(b *testing.B) {
	ns, hostAddr, nsAddr := benchSetup(b)
	d, err := NewDialer(ns.path)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()

	run := func(name string, dial func(context.Context, string, string) (net.Conn, error), addr string) {
		b.Run(name, func(b *testing.B) {
			c0 := cpuTime()
			for b.Loop() {
				dialClose(b, dial, addr)
			}
			b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
	run("host", HostDialer().DialContext, hostAddr)
	run("netns", d.DialContext, nsAddr)
	for _, n := range []int{1, 4, 16} {
		dn, err := NewDialer(ns.path)
		if err != nil {
			b.Fatal(err)
		}
		defer dn.Close()
		dn.ns.batch = n
		run("netns-batch-"+strconv.Itoa(n), dn.DialContext, nsAddr)
	}
	run("netns-open-per-dial", func(ctx context.Context, network, addr string) (net.Conn, error) {
		d, err := NewDialer(ns.path)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.DialContext(ctx, network, addr)
	}, nsAddr)
	run("netns-locked-pool", newLockedPool(b, d.ns, 2).dial, nsAddr)
	run("netns-inline-unsafe", func(ctx context.Context, network, addr string) (net.Conn, error) {
		return inlineDial(ctx, d.ns, network, addr)
	}, nsAddr)
}

// BenchmarkNetnsVsHostDial reports both costs and their ratio from one run
// of interleaved blocks of dials: wall time per dial (latency, sensitive to
// other load on the machine) and the process's CPU time per dial (the cost,
// listener side included, which is the same for both). It makes at least
// 2000 dials of each kind whatever b.N is, so it prints meaningful numbers
// at -benchtime 1x (as `make bench` runs it).
func BenchmarkNetnsVsHostDial(b *testing.B) {
	ns, hostAddr, nsAddr := benchSetup(b)
	d, err := NewDialer(ns.path)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	h := HostDialer()
	const block = 100
	n := max(b.N, 2000)
	var wall, cpu [2]time.Duration
	b.ResetTimer()
	for i := 0; i < n; i += block {
		for k, dial := range []func(context.Context, string, string) (net.Conn, error){h.DialContext, d.DialContext} {
			addr := []string{hostAddr, nsAddr}[k]
			c0, w0 := cpuTime(), time.Now()
			for range block {
				dialClose(b, dial, addr)
			}
			wall[k] += time.Since(w0)
			cpu[k] += cpuTime() - c0
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n/block*block) }
	b.ReportMetric(per(wall[0]), "host-ns/dial")
	b.ReportMetric(per(wall[1]), "netns-ns/dial")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "netns/host")
	b.ReportMetric(per(cpu[0]), "host-cpu-ns/dial")
	b.ReportMetric(per(cpu[1]), "netns-cpu-ns/dial")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "netns/host-cpu")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lockedPool is the alternative design: long-lived goroutines locked to
// their threads that enter the namespace for each request.
type lockedPool struct{ reqs chan func() }

func newLockedPool(b *testing.B, h *handle, size int) *lockedPool {
	origin, err := originNS()
	if err != nil {
		b.Fatal(err)
	}
	p := &lockedPool{reqs: make(chan func())}
	for range size {
		go func() {
			runtime.LockOSThread()
			for fn := range p.reqs {
				if setns(h.f) != nil {
					fn()
					continue
				}
				fn()
				if setns(origin) != nil {
					return // thread dies
				}
			}
			runtime.UnlockOSThread()
		}()
	}
	b.Cleanup(func() { close(p.reqs) })
	return p
}

func (p *lockedPool) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	done := make(chan struct{})
	p.reqs <- func() {
		defer close(done)
		c, err = (&net.Dialer{Control: setLinger}).DialContext(ctx, network, addr)
	}
	<-done
	return c, err
}

// inlineDial is the inline-unsafe design, for comparison only.
func inlineDial(ctx context.Context, h *handle, network, address string) (net.Conn, error) {
	origin, err := originNS()
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	if err := setns(h.f); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	inside := true
	leave := func() {
		if inside {
			inside = false
			if setns(origin) == nil {
				runtime.UnlockOSThread()
			}
		}
	}
	d := net.Dialer{ControlContext: func(_ context.Context, network, address string, c syscall.RawConn) error {
		_ = setLinger(network, address, c)
		leave()
		return nil
	}}
	c, err := d.DialContext(ctx, network, address)
	leave()
	return c, err
}
