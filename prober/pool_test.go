// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func execCmd(cmd string) func(*corev1.Probe) {
	return func(p *corev1.Probe) { p.Exec.Command = []string{cmd} }
}

// No more execs run at once than the exec pool allows, however many are
// due; the rest wait, start late, and
// are counted and reported as late rather than dropped. Network probes have
// their own pool and are not held up by busy execs.
func TestPoolsBoundConcurrencyAndReportLateStarts(t *testing.T) {
	h := newHarness(t, WithConcurrency(2, 0))
	h.running("c1")
	var mu sync.Mutex
	running, peak := 0, 0
	release := make(chan struct{})
	h.exec.setHook(func(context.Context) {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
	})
	var ds []Desired
	for _, name := range []string{"hog-1", "hog-2", "hog-3", "hog-4", "hog-5", "hog-6"} {
		d := desired(name, execSpec(execCmd(name)))
		d.Pod.Namespace = "hog"
		ds = append(ds, d)
	}
	other := desired("other", execSpec(execCmd("other")))
	other.Pod.Namespace = "other"
	// A TCP probe to a port nobody listens on: it fails at once.
	tcp := desired("tcp", corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(1)}}})
	// The other tenant's probe is due last.
	h.m.Sync(ds)
	h.clock.Step(time.Millisecond)
	h.m.Sync(append(ds, other, tcp))
	h.m.dispatchDue()

	eventually(t, "two execs running", func() bool { mu.Lock(); defer mu.Unlock(); return running == 2 })
	eventually(t, "the network probe done while execs wait", func() bool { _, ok := h.result(key("tcp")); return ok })
	h.m.mu.Lock()
	queued := h.m.execPool.queue.n
	h.m.mu.Unlock()
	if queued != 5 {
		t.Fatalf("%d execs queued, want 5", queued)
	}
	if got := poolMetric(t, h, "probeshim_probes_queued"); got["exec"] != 5 || got["network"] != 0 {
		t.Errorf("probeshim_probes_queued = %v, want exec 5, network 0", got)
	}

	h.clock.Step(3 * time.Second) // the queued ones are now 3 s late
	close(release)
	h.m.inflight.Wait()

	if peak != 2 {
		t.Errorf("%d execs ran at once, want at most 2", peak)
	}
	if n := h.exec.count(); n != 7 {
		t.Fatalf("%d execs ran, want 7", n)
	}
	if got := h.m.execPool.late.Load(); got != 5 {
		t.Errorf("%d late starts counted, want 5", got)
	}
	if got := h.m.netPool.late.Load(); got != 0 {
		t.Errorf("%d late network starts, want 0", got)
	}
	if got := poolMetric(t, h, "probeshim_probes_started_late_total"); got["exec"] != 5 || got["network"] != 0 {
		t.Errorf("probeshim_probes_started_late_total = %v, want exec 5, network 0", got)
	}
	if got := poolMetric(t, h, "probeshim_probe_start_delay_seconds"); got["exec"] != 7 || got["network"] != 1 {
		t.Errorf("probeshim_probe_start_delay_seconds counts = %v, want exec 7, network 1", got)
	}
}

// poolMetric returns a pool metric's value (a histogram's count) by pool.
func poolMetric(t *testing.T, h *harness, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range gather(t, h.reg)[name].GetMetric() {
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		out[labels(m)["pool"]] = v
	}
	return out
}

// Queued probes are taken round-robin between namespaces: the other
// tenant's probe waits for one of the hog's, not for all of them.
func TestFairQueueRoundRobinsNamespaces(t *testing.T) {
	var q fairQueue
	q.byNS = map[string][]job{}
	mk := func(ns, name string) job {
		return job{w: &worker{key: Key{Probe: name}, pod: podID{namespace: ns}}}
	}
	for _, j := range []job{mk("hog", "h1"), mk("hog", "h2"), mk("hog", "h3"), mk("a", "a1"), mk("hog", "h4"), mk("b", "b1"), mk("a", "a2")} {
		q.push(j)
	}
	var got []string
	for {
		j, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, j.w.key.Probe)
	}
	if want := "h1 a1 b1 h2 a2 h3 h4"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
	if q.n != 0 || len(q.byNS) != 0 || len(q.order) != 0 {
		t.Errorf("queue not empty after popping all: %+v", q)
	}
}

// Runners that go idle exit, and a job promised to one as it exits is still
// run: after many bursts with idle gaps every probe ran and no runner is left.
func TestPoolRunnersExitWhenIdle(t *testing.T) {
	h := newHarness(t, WithConcurrency(3, 0))
	h.running("c1")
	var ds []Desired
	for i := range 10 {
		ds = append(ds, desired(string(rune('a'+i)), execSpec(period(1))))
	}
	h.m.Sync(ds)
	for i := range 5 {
		h.advance(time.Second)
		if i%2 == 1 { // an idle gap: the runners of this burst exit before the next
			eventually(t, "the runners to exit", func() bool {
				h.m.mu.Lock()
				defer h.m.mu.Unlock()
				return h.m.execPool.alive == 0
			})
		}
	}
	if n := h.exec.count(); n != 50 {
		t.Fatalf("%d probes ran, want 50", n)
	}
	eventually(t, "idle runners gone", func() bool {
		h.m.mu.Lock()
		defer h.m.mu.Unlock()
		return h.m.execPool.alive == 0 && h.m.execPool.idle == 0
	})
}
