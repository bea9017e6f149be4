// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every decider has its own metrics on the registry it is given, under the names the deployment
// has always served; a second decider on a second registry neither fails nor shares counts.
func TestMetricsPerInstance(t *testing.T) {
	regA, regB := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	a, b := newMetrics(func() float64 { return 3 }), newMetrics(func() float64 { return 7 })
	if err := a.register(regA); err != nil {
		t.Fatal(err)
	}
	if err := b.register(regB); err != nil {
		t.Fatal(err)
	}
	if err := a.register(prometheus.NewRegistry()); err != nil {
		t.Fatalf("registering one decider's metrics on another registry: %v", err)
	}
	if err := b.register(regB); err == nil {
		t.Error("registering twice on one registry succeeded, want the duplicate refused")
	}
	a.decisions.WithLabelValues("restart", "LivenessFailed").Inc()
	a.configValid.Set(0)
	if v := testutil.ToFloat64(b.decisions.WithLabelValues("restart", "LivenessFailed")); v != 0 {
		t.Errorf("b counted a's decision: %v", v)
	}
	if v := testutil.ToFloat64(b.configValid); v != 1 {
		t.Errorf("b's config_valid = %v, want 1", v)
	}
	if v := testutil.ToFloat64(a.tokens); v != 3 {
		t.Errorf("a's tokens = %v, want its own source's 3", v)
	}
	a.reaction.Observe(1)
	mfs, err := regA.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	want := []string{"probeshim_decider_circuit_breakers_open", "probeshim_decider_config_valid",
		"probeshim_decider_decisions_total", "probeshim_decider_held_pods", "probeshim_decider_rate_limit_tokens", "probeshim_decider_reaction_seconds"}
	if !slices.Equal(names, want) {
		t.Errorf("served %v, want %v", names, want)
	}
	// Every held reason's series exists before its first hold, at zero.
	if n := testutil.CollectAndCount(a.held); n != len(heldReasons) {
		t.Errorf("%d held_pods series, want one per reason (%d)", n, len(heldReasons))
	}
}

// probeshim_decider_held_pods is the sum of every workload's current holds: a workload's new count
// replaces its old one, and a forgotten workload takes its part away.
func TestHeldPods(t *testing.T) {
	d := &decider{metrics: newMetrics(func() float64 { return 0 }), heldBy: map[Workload]map[Reason]int{}}
	web, db := Workload{Kind: "Deployment", Namespace: "a", Name: "web"}, Workload{Kind: "StatefulSet", Namespace: "b", Name: "db"}
	d.setHeld(web, map[Reason]int{ReasonMaxUnavailable: 2})
	d.setHeld(db, map[Reason]int{ReasonMaxUnavailable: 1, ReasonNodeNotReady: 1})
	d.setHeld(web, map[Reason]int{ReasonMaxUnavailable: 1})
	if v := testutil.ToFloat64(d.metrics.held.WithLabelValues(string(ReasonMaxUnavailable))); v != 2 {
		t.Errorf("MaxUnavailable %v, want 2 (web's 1 and db's 1)", v)
	}
	d.setHeld(db, nil)
	if v := testutil.ToFloat64(d.metrics.held.WithLabelValues(string(ReasonNodeNotReady))); v != 0 {
		t.Errorf("NodeNotReady %v after db's holds ended, want 0", v)
	}
}
