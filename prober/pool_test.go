// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"fmt"
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
	h := newHarness(t, WithConcurrency(2, 0), WithNamespaceConcurrency(2, 0))
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
		j, ok := q.pop(func(string) bool { return true }, func(string) int { return 0 })
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

// A namespace at its limit keeps its turn: the others are taken round-robin
// past it, and it comes first once it may run again.
func TestFairQueueSkipsNamespacesAtTheirLimit(t *testing.T) {
	var q fairQueue
	q.byNS = map[string][]job{}
	mk := func(ns, name string) job {
		return job{w: &worker{key: Key{Probe: name}, pod: podID{namespace: ns}}}
	}
	for _, j := range []job{mk("hog", "h1"), mk("hog", "h2"), mk("a", "a1"), mk("b", "b1"), mk("a", "a2")} {
		q.push(j)
	}
	full := map[string]bool{"hog": true}
	may := func(ns string) bool { return !full[ns] }
	var got []string
	pop := func() {
		j, ok := q.pop(may, func(string) int { return 0 })
		if !ok {
			got = append(got, "-")
			return
		}
		got = append(got, j.w.key.Probe)
	}
	pop()
	pop()
	pop()
	pop() // only the hog's jobs are left, and it may not run
	full["hog"] = false
	pop()
	pop()
	pop()
	if want := "a1 b1 a2 - h1 h2 -"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

// A namespace that runs nothing gets the next free runner before namespaces
// that run some, whatever their turn: a tenant flooding the pool from many
// namespaces, each within its share, does not push another tenant's probe
// behind all of theirs.
func TestFairQueueFavoursNamespacesRunningLeast(t *testing.T) {
	var q fairQueue
	q.byNS = map[string][]job{}
	mk := func(ns, name string) job {
		return job{w: &worker{key: Key{Probe: name}, pod: podID{namespace: ns}}}
	}
	for _, j := range []job{mk("flood-1", "f1"), mk("flood-2", "f2"), mk("flood-3", "f3"), mk("other", "o1"), mk("flood-1", "f1b")} {
		q.push(j)
	}
	running := map[string]int{"flood-1": 8, "flood-2": 8, "flood-3": 7}
	var got []string
	for {
		j, ok := q.pop(func(string) bool { return true }, func(ns string) int { return running[ns] })
		if !ok {
			break
		}
		got = append(got, j.w.key.Probe)
		running[j.w.pod.namespace]++
	}
	if want := "o1 f3 f1 f2 f1b"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

// One namespace's probes that hang until their timeout hold at most its share
// of the pool: another namespace's exec keeps running on time, every period,
// while they hang (before the limit it waited for the hog's runners to free).
func TestNamespaceLimitLeavesRunnersForOthers(t *testing.T) {
	h := newHarness(t, WithConcurrency(4, 0), WithNamespaceConcurrency(2, 0))
	h.running("c1")
	var mu sync.Mutex
	hogs, peak, others := 0, 0, 0
	release := make(chan struct{})
	h.exec.setCmdHook(func(_ context.Context, cmd []string) {
		if cmd[0] != "hang" {
			mu.Lock()
			others++
			mu.Unlock()
			return
		}
		mu.Lock()
		hogs++
		peak = max(peak, hogs)
		mu.Unlock()
		<-release
		mu.Lock()
		hogs--
		mu.Unlock()
	})
	var ds []Desired
	for i := range 8 {
		d := desired(fmt.Sprintf("hog-%d", i), execSpec(execCmd("hang"), period(1)))
		d.Pod.Namespace = "hog"
		ds = append(ds, d)
	}
	other := desired("other", execSpec(execCmd("true"), period(1)))
	other.Pod.Namespace = "other"
	h.m.Sync(append(ds, other))
	h.m.dispatchDue()
	eventually(t, "the hog's share running", func() bool { mu.Lock(); defer mu.Unlock(); return hogs == 2 })
	for i := range 5 {
		// Ran and ended: its worker is queued for the next period before the
		// clock steps, or the step would find nothing due.
		eventually(t, "the other namespace's probe to run and end", func() bool {
			mu.Lock()
			ran := others == i+1
			mu.Unlock()
			h.m.mu.Lock()
			defer h.m.mu.Unlock()
			return ran && h.m.execPool.running["other"] == 0
		})
		h.clock.Step(time.Second)
		h.m.dispatchDue()
	}
	if late := h.m.execPool.late.Load(); late != 0 {
		t.Errorf("%d late starts while the hog held its share, want 0", late)
	}
	close(release)
	h.m.inflight.Wait()
	if peak != 2 {
		t.Errorf("the hog ran %d execs at once, want its limit 2", peak)
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if n := len(h.m.execPool.running); n != 0 {
		t.Errorf("running counts left after every probe ended: %v", h.m.execPool.running)
	}
}

// The per-namespace limit defaults to a quarter of the pool, and never
// exceeds the pool.
func TestNamespaceLimitDefaults(t *testing.T) {
	h := newHarness(t)
	if got := h.m.execPool.nsLimit; got != DefaultExecConcurrency/4 {
		t.Errorf("exec limit per namespace %d, want %d", got, DefaultExecConcurrency/4)
	}
	if got := h.m.netPool.nsLimit; got != DefaultNetworkConcurrency/4 {
		t.Errorf("network limit per namespace %d, want %d", got, DefaultNetworkConcurrency/4)
	}
	h = newHarness(t, WithConcurrency(2, 3), WithNamespaceConcurrency(5, 0))
	if h.m.execPool.nsLimit != 2 || h.m.netPool.nsLimit != 1 {
		t.Errorf("limits per namespace %d and %d, want 2 (the pool's) and 1", h.m.execPool.nsLimit, h.m.netPool.nsLimit)
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

// WithMaxTimeout caps a probe's timeout whatever its spec says (a NodePodProbe
// written past admission's ceiling): the runner is held no longer.
func TestMaxTimeoutCapsTheSpec(t *testing.T) {
	h := newHarness(t, WithMaxTimeout(30*time.Second))
	h.running("c1")
	timeout := func(s int32) func(*corev1.Probe) { return func(p *corev1.Probe) { p.TimeoutSeconds = s } }
	h.m.Sync([]Desired{desired("slow", execSpec(timeout(55)))})
	h.advance(0)
	if got := h.exec.last().timeout; got != 30*time.Second {
		t.Errorf("a 55 s probe ran with timeout %s, want the 30 s cap", got)
	}
	h.m.Sync([]Desired{desired("slow", execSpec(timeout(5)))})
	h.advance(10 * time.Second)
	if got := h.exec.last().timeout; got != 5*time.Second {
		t.Errorf("a 5 s probe ran with timeout %s, want its own", got)
	}
}

// Pools reports each pool's limits, what runs and waits, and the latest late start.
func TestPoolsStatus(t *testing.T) {
	h := newHarness(t, WithConcurrency(4, 0), WithNamespaceConcurrency(2, 0))
	h.running("c1")
	release := make(chan struct{})
	h.exec.setHook(func(context.Context) { <-release })
	var ds []Desired
	for i := range 3 {
		d := desired(fmt.Sprintf("hog-%d", i), execSpec())
		d.Pod.Namespace = "hog"
		ds = append(ds, d)
	}
	h.m.Sync(ds)
	h.m.dispatchDue()
	eventually(t, "two execs started", func() bool { return h.exec.count() == 2 })
	h.clock.Step(2 * time.Second)
	got := h.m.Pools()
	if want := (PoolStatus{Name: "exec", Limit: 4, PerNamespace: 2, Running: 2, Queued: 1}); got[0] != want {
		t.Errorf("exec pool %+v, want %+v", got[0], want)
	}
	if got[1].Name != "network" || got[1].Limit != DefaultNetworkConcurrency || got[1].Running != 0 {
		t.Errorf("network pool %+v", got[1])
	}
	close(release)
	h.m.inflight.Wait()
	got = h.m.Pools()
	if got[0].StartedLate != 1 || got[0].LastLateBy != 2*time.Second || !got[0].LastLate.Equal(h.clock.Now()) || got[0].Running != 0 {
		t.Errorf("after the queued probe started 2 s late: %+v", got[0])
	}
}
