// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"testing"
	"time"

	"github.com/probeshim/probeshim/prober"
)

// The node says its probes start late for a minute after the latest late start, naming the pool,
// how late and why; then no more.
func TestProbesLate(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	exec := prober.PoolStatus{Name: "exec", Limit: 32, PerNamespace: 8}
	network := prober.PoolStatus{Name: "network", Limit: 256, PerNamespace: 64}
	if got := probesLate(now, []prober.PoolStatus{exec, network}); got != "" {
		t.Errorf("never late: %q", got)
	}
	full := exec
	full.Running, full.Queued, full.LastLate, full.LastLateBy = 32, 37, now.Add(-4*time.Second), 12340*time.Millisecond
	share := network
	share.Running, share.Queued, share.LastLate, share.LastLateBy = 64, 10, now.Add(-time.Minute), 2*time.Second
	want := "exec probes start late: the latest 12s after its time (all 32 runners busy); " +
		"network probes start late: the latest 2s after its time (namespaces at their share of 64 runners)"
	if got := probesLate(now, []prober.PoolStatus{full, share}); got != want {
		t.Errorf("late:\n got %q\nwant %q", got, want)
	}
	overloaded := exec
	overloaded.LastLate, overloaded.LastLateBy = now.Add(-10*time.Second), 3*time.Second
	if got, want := probesLate(now, []prober.PoolStatus{overloaded}), "exec probes start late: the latest 3s after its time (the node is overloaded)"; got != want {
		t.Errorf("late with room:\n got %q\nwant %q", got, want)
	}
	// The same while as late: nothing that changes by itself every renewal.
	later := full
	later.Running, later.Queued, later.LastLate, later.LastLateBy = 32, 12, now.Add(-time.Second), 11900*time.Millisecond
	if a, b := probesLate(now, []prober.PoolStatus{full}), probesLate(now.Add(10*time.Second), []prober.PoolStatus{later}); a != b {
		t.Errorf("the note changed while as late:\n%q\n%q", a, b)
	}
	if got := probesLate(now.Add(61*time.Second), []prober.PoolStatus{full, share}); got != "" {
		t.Errorf("a minute after the latest late start: %q", got)
	}
}
