// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func period(s int32) func(*corev1.Probe) { return func(p *corev1.Probe) { p.PeriodSeconds = s } }

func (h *harness) next(k Key) time.Time {
	w := h.worker(k)
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return w.next
}

// SEMANTICS: jitter only right after the service starts; otherwise probe at
// once, then every periodSeconds.
func TestScheduleJitterOnlyOnFirstSync(t *testing.T) {
	h := newHarness(t)
	h.m.jitter = func() float64 { return 0.25 }
	h.running("c1")
	a := desired("a", execSpec(period(8)))
	h.m.Sync([]Desired{a})
	if got, want := h.next(key("a")), t0.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("first sync: next probe at %v, want %v (jitter 0.25 of 8s)", got, want)
	}
	b := desired("b", execSpec(period(8)))
	h.m.Sync([]Desired{a, b})
	if got := h.next(key("b")); !got.Equal(t0) {
		t.Fatalf("later sync: next probe at %v, want now", got)
	}
	if got, want := h.next(key("a")), t0.Add(2*time.Second); !got.Equal(want) {
		t.Fatalf("resync moved an unchanged worker to %v", got)
	}

	h.advance(0)
	if n := h.exec.count(); n != 1 {
		t.Fatalf("%d probes at once, want 1 (b)", n)
	}
	h.advance(2 * time.Second)
	if n := h.exec.count(); n != 2 {
		t.Fatalf("%d probes after a's jitter, want 2", n)
	}
	// Then every period from each one's first probe.
	h.advance(6*time.Second - time.Millisecond)
	if n := h.exec.count(); n != 2 {
		t.Fatalf("%d probes before b's period ended", n)
	}
	h.advance(time.Millisecond)
	if n := h.exec.count(); n != 3 {
		t.Fatalf("%d probes when b's period ended, want 3", n)
	}
	h.advance(2 * time.Second)
	if n := h.exec.count(); n != 4 {
		t.Fatalf("%d probes when a's period ended, want 4", n)
	}
}

// A probe that outlasts its period resumes at the next slot of its schedule.
func TestOverrunResumesAtNextSlot(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec(period(10)))})
	h.exec.hook = func(context.Context) { h.clock.Step(25 * time.Second) }
	h.advance(0)
	if got, want := h.next(key("a")), t0.Add(30*time.Second); !got.Equal(want) {
		t.Fatalf("next %v, want %v (the slot after the overrun)", got, want)
	}
	h.exec.hook = func(context.Context) { h.clock.Step(10 * time.Second) } // exactly a period: not late
	h.advance(5 * time.Second)
	if got, want := h.next(key("a")), t0.Add(40*time.Second); !got.Equal(want) {
		t.Fatalf("next %v, want %v", got, want)
	}
}

func TestContainerChangedProbesAtOnce(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec()), desired("b", execSpec())})
	h.advance(0)
	if n := h.exec.count(); n != 2 {
		t.Fatalf("%d probes, want 2", n)
	}
	h.clock.Step(3 * time.Second)
	h.running("c2")
	h.m.ContainerChanged(podUID, "other") // no such workers: nothing happens
	h.m.ContainerChanged(podUID, ctr)
	h.advance(0)
	if n := h.exec.count(); n != 4 {
		t.Fatalf("%d probes after ContainerChanged, want 4", n)
	}
	if c := h.exec.last(); c.containerID != "c2" {
		t.Fatalf("probed %s", c.containerID)
	}
	// The period restarts from the woken probe.
	if got, want := h.next(key("a")), t0.Add(13*time.Second); !got.Equal(want) {
		t.Fatalf("next %v, want %v", got, want)
	}
}

// A wake that arrives while the probe runs is not lost.
func TestContainerChangedWhileRunning(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec())})
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.exec.hook = func(context.Context) {
		once.Do(func() {
			close(started)
			<-release
		})
	}
	h.m.dispatchDue()
	<-started
	h.m.ContainerChanged(podUID, ctr)
	close(release)
	h.m.inflight.Wait()
	if got := h.next(key("a")); !got.Equal(t0) {
		t.Fatalf("next %v, want at once", got)
	}
}

// SEMANTICS: a period change applies to the running worker.
func TestLivePeriodUpdate(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	d := desired("a", execSpec(period(60)))
	h.m.Sync([]Desired{d})
	h.advance(0)
	h.advance(10 * time.Second)
	d.Spec.PeriodSeconds = 5
	h.m.Sync([]Desired{d})
	if got := h.next(key("a")); !got.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next %v: a shorter period that has already passed should probe now", got)
	}
	h.advance(0)
	if got := h.next(key("a")); !got.Equal(t0.Add(15 * time.Second)) {
		t.Fatalf("next %v, want +5s", got)
	}
	d.Spec.PeriodSeconds = 20
	h.m.Sync([]Desired{d})
	if got := h.next(key("a")); !got.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("next %v, want last start + 20s", got)
	}
}

func TestSyncRemoves(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec()), desired("b", execSpec())})
	h.advance(0)
	h.expect(key("a"), Success)
	h.m.Sync([]Desired{desired("b", execSpec())})
	h.expectNone(key("a"))
	h.advance(time.Minute)
	if n := h.exec.count(); n != 3 {
		t.Fatalf("%d probes, want 3 (a stopped)", n)
	}
	h.m.mu.Lock()
	nw, nc, nq := len(h.m.workers), len(h.m.byContainer[containerRef{podUID, ctr}]), len(h.m.queue)
	h.m.mu.Unlock()
	if nw != 1 || nc != 1 || nq != 1 {
		t.Fatalf("workers %d, by container %d, queued %d; want 1 each", nw, nc, nq)
	}
}

// A probe in flight when its worker is removed publishes nothing and leaves
// no metrics behind; its context is cancelled.
func TestRemoveWhileRunning(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec())})
	started := make(chan struct{})
	cancelled := make(chan struct{})
	h.exec.hook = func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(cancelled)
	}
	h.m.dispatchDue()
	<-started
	h.m.Sync(nil)
	<-cancelled
	h.m.inflight.Wait()
	h.expectNone(key("a"))
	if n := seriesCount(t, h.reg, "prober_probe_total"); n != 0 {
		t.Fatalf("%d series left", n)
	}
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	if len(h.m.queue) != 0 {
		t.Fatal("removed worker was requeued")
	}
}

// Changing a probe's metric identity (its probe type) replaces the worker.
func TestProbeTypeChangeReplacesWorker(t *testing.T) {
	h := newHarness(t)
	d := desired("a", execSpec())
	h.m.Sync([]Desired{d})
	w := h.worker(key("a"))
	d.ProbeType = "liveness"
	h.m.Sync([]Desired{d, d}) // a duplicate key is ignored
	if h.worker(key("a")) == w {
		t.Fatal("worker kept across a probe type change")
	}
}

// Updates carries changes of result or message only, in order, and
// Snapshot the latest of each probe.
func TestUpdatesOnlyOnChange(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec(threshold(1, 1)))})
	recv := func() Update {
		t.Helper()
		select {
		case u := <-h.m.Updates():
			return u
		case <-time.After(5 * time.Second):
			t.Fatal("no update")
		}
		return Update{}
	}
	h.exec.push(ok)
	h.advance(0) // Unknown for the new container, then Success: coalesced
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.m.results.run(ctx)
	if u := recv(); u.Result != Success || u.Message != "ok" || u.Key != key("a") || !u.Time.Equal(t0) {
		t.Fatalf("update %+v", u)
	}
	h.advance(10 * time.Second) // same result and message: no update
	h.exec.push(outOf(0, "ok, different words"))
	h.advance(10 * time.Second)
	if u := recv(); u.Result != Success || u.Message != "ok, different words" {
		t.Fatalf("update %+v", u)
	}
	h.exec.push(fail)
	h.advance(10 * time.Second)
	if u := recv(); u.Result != Failure || !u.Time.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("update %+v", u)
	}
	select {
	case u := <-h.m.Updates():
		t.Fatalf("unexpected update %+v", u)
	default:
	}
	snap := h.m.Snapshot()
	if len(snap) != 1 || snap[0].Result != Failure {
		t.Fatalf("snapshot %+v", snap)
	}
}

// A reader that falls behind gets the latest result per probe, and none for
// a flip that came back to what it last received.
func TestUpdatesCoalesce(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec(threshold(1, 1)))})
	h.exec.push(ok, fail, ok)
	h.advance(0) // Unknown, then Success: queued once, Success is latest
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.m.results.run(ctx)
	if u := <-h.m.Updates(); u.Result != Success {
		t.Fatalf("got %v, want the latest (Success)", u.Result)
	}
	cancel()
	h.advance(10 * time.Second) // Failure
	h.advance(10 * time.Second) // back to Success before the reader saw Failure
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	go h.m.results.run(ctx2)
	h.exec.push(outOf(1, "later"))
	h.advance(10 * time.Second)
	if u := <-h.m.Updates(); u.Result != Failure || u.Message != "later" {
		t.Fatalf("got %+v, want only the later failure", u)
	}
}

// Run schedules on the clock, and on return cancels probes in flight and
// closes Updates.
func TestRun(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec(period(1)))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.m.Run(ctx) }()

	// Collect the updates in the background, as a consumer would.
	got := make(chan Update, 100)
	go func() {
		for u := range h.m.Updates() {
			got <- u
		}
		close(got)
	}()
	eventually(t, "first probe", func() bool { return h.exec.count() == 1 })
	for i := 2; i <= 3; i++ {
		// Step in small increments: the scheduler may still be arming its timer.
		eventually(t, "probe "+string(rune('0'+i)), func() bool {
			h.clock.Step(100 * time.Millisecond)
			return h.exec.count() >= i
		})
	}
	if err := h.m.Run(ctx); err == nil {
		t.Fatal("second Run succeeded")
	}

	blocked := make(chan struct{})
	var once sync.Once
	h.exec.setHook(func(ctx context.Context) {
		once.Do(func() { close(blocked) })
		<-ctx.Done()
	})
	eventually(t, "a blocked probe", func() bool {
		select {
		case <-blocked:
			return true
		default:
			h.clock.Step(100 * time.Millisecond)
			return false
		}
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var last Update
	for u := range got {
		last = u
	}
	if last.Result != Success {
		t.Fatalf("last update %+v", last)
	}
}

// A worker's context lives as long as the worker: removal must cancel it,
// idle or not, or every removed probe would stay among the base context's
// children for the life of the service.
func TestRemovedWorkerReleasesItsContext(t *testing.T) {
	h := newHarness(t)
	h.running("c1")
	h.m.Sync([]Desired{desired("a", execSpec(period(10))), desired("b", execSpec(period(10)))})
	h.advance(0)
	a, b := h.worker(key("a")), h.worker(key("b"))
	h.m.Sync([]Desired{desired("b", execSpec(period(10)))})
	if a.ctx.Err() == nil {
		t.Fatal("a removed worker's context is still live")
	}
	if b.ctx.Err() != nil {
		t.Fatal("a kept worker's context was cancelled")
	}
	// Probing goes on for b with the same context.
	n := h.exec.count()
	h.advance(10 * time.Second)
	if h.exec.count() != n+1 {
		t.Fatalf("%d probes after a period, want %d", h.exec.count(), n+1)
	}
}
