// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"strings"
	"testing"
	"time"
)

// One namespace flooding failures takes its own share and no more: another namespace's first
// restart gets a token at once. Without the per-namespace buckets the flood took the whole
// cluster-wide burst and the other namespace waited a full token period.
func TestNamespaceCannotUseUpTheClusterRate(t *testing.T) {
	s, err := ParseConfig("rateLimit: {qps: 1, burst: 5, perNamespace: {qps: 0.25, burst: 2}}")
	if err != nil {
		t.Fatal(err)
	}
	b := newBucket(s)
	now := t0
	granted := 0
	for i := range 20 { // 20 failures of namespace a within 2 s
		if ok, scope, wait := b.Take("a", now.Add(time.Duration(i)*100*time.Millisecond)); ok {
			granted++
		} else if scope != ScopeNamespace || wait <= 0 {
			t.Fatalf("a's request %d held by %q for %s, want its namespace's bucket", i, scope, wait)
		}
	}
	if granted != 2 {
		t.Errorf("namespace a got %d tokens in 2 s, want its burst of 2", granted)
	}
	if ok, scope, wait := b.Take("b", now.Add(2*time.Second)); !ok {
		t.Fatalf("namespace b held (%s, %s) by a's flood", scope, wait)
	}
	// The cluster-wide bucket still binds all namespaces together.
	held := 0
	for i := range 10 {
		if ok, scope, _ := b.Take(string(rune('c'+i)), now.Add(2*time.Second)); !ok && scope == ScopeCluster {
			held++
		}
	}
	if held == 0 {
		t.Error("ten namespaces at once never met the cluster-wide limit")
	}
}

func TestNamespaceRateConfig(t *testing.T) {
	for doc, want := range map[string]string{
		"rateLimit: {qps: 1, perNamespace: {qps: 1}}":     "rateLimit.perNamespace.qps: must be greater than 0 and less than rateLimit.qps",
		"rateLimit: {burst: 3, perNamespace: {burst: 4}}": "rateLimit.perNamespace.burst: must be between 1 and rateLimit.burst (3), got 4",
	} {
		if _, err := ParseConfig(doc); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	s, err := ParseConfig("rateLimit: {qps: 2, burst: 1}")
	if err != nil || s.NamespaceQPS != 0.5 || s.NamespaceBurst != 1 {
		t.Errorf("defaults from qps 2, burst 1: %v %v, %v", s.NamespaceQPS, s.NamespaceBurst, err)
	}
}

// While a large share of the cluster's probed pods fail, the cluster-wide bucket runs at the
// unhealthy rate, one at a time; healthy again, at the configured rate and burst.
func TestUnhealthyClusterSlowsTheRate(t *testing.T) {
	s, err := ParseConfig("rateLimit: {qps: 1, burst: 5, perNamespace: {qps: 0.5, burst: 5}}")
	if err != nil {
		t.Fatal(err)
	}
	if s.UnhealthyQPS != 0.1 || s.UnhealthyMinFailingPods != 20 || s.UnhealthyShare.String() != "55%" {
		t.Fatalf("defaults: %v %v %v", s.UnhealthyQPS, s.UnhealthyMinFailingPods, s.UnhealthyShare.String())
	}
	b := newBucket(s)
	b.configure(t0, s, true)
	granted := 0
	for i := range 10 {
		if ok, _, _ := b.Take(string(rune('a'+i)), t0.Add(time.Duration(i)*time.Second)); ok {
			granted++
		}
	}
	if granted != 1 {
		t.Errorf("slowed: %d restarts in 10 s, want 1 (0.1 per second, one at a time)", granted)
	}
	// Healthy again: the bucket refills at the configured rate up to its burst.
	later := t0.Add(time.Minute)
	b.configure(later, s, false)
	granted = 0
	for i := range 10 {
		if ok, _, _ := b.Take(string(rune('k'+i)), later.Add(5*time.Second)); ok {
			granted++
		}
	}
	if granted != 5 {
		t.Errorf("healthy again for 5 s: %d restarts at once, want the burst of 5", granted)
	}
}
