// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWaitForTimeoutNamesWhatAndLastSeen(t *testing.T) {
	n := 0
	err := WaitFor(context.Background(), 300*time.Millisecond, "the answer", func(context.Context) (bool, string, error) {
		n++
		return false, "still 41", nil
	})
	if err == nil || !strings.Contains(err.Error(), "the answer") || !strings.Contains(err.Error(), "still 41") {
		t.Fatalf("err = %v", err)
	}
	if n < 2 {
		t.Fatalf("polled %d times", n)
	}
	boom := errors.New("boom")
	if err := WaitFor(context.Background(), time.Minute, "x", func(context.Context) (bool, string, error) { return false, "", boom }); !errors.Is(err, boom) {
		t.Fatalf("a condition's error must end the wait: %v", err)
	}
}

func TestNever(t *testing.T) {
	if err := Never(context.Background(), 150*time.Millisecond, "a change", func(context.Context) (bool, string, error) {
		return false, "same", nil
	}); err != nil {
		t.Fatalf("nothing happened, but Never = %v", err)
	}
	n := 0
	err := Never(context.Background(), time.Minute, "a change", func(context.Context) (bool, string, error) {
		n++
		return n == 2, "changed", nil
	})
	if err == nil || !strings.Contains(err.Error(), "a change within 1m0s: changed") {
		t.Fatalf("Never = %v, want what happened at once", err)
	}
	boom := errors.New("boom")
	if err := Never(context.Background(), time.Minute, "x", func(context.Context) (bool, string, error) { return false, "", boom }); !errors.Is(err, boom) {
		t.Fatalf("a condition's error must end the look: %v", err)
	}
}

func TestNetNSFromInfo(t *testing.T) {
	info := `{"pid":1,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/x/netns/cni-1"}]}}}`
	if got := netnsFromInfo(info); got != "/x/netns/cni-1" {
		t.Fatalf("got %q", got)
	}
}

// TestEnvtest checks the envtest wiring to the rig's binaries: an API server
// (no kubelet) that takes objects.
func TestEnvtest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	start := time.Now()
	_, cl := StartEnvtest(t, nil)
	t.Logf("envtest up in %s", time.Since(start).Round(time.Millisecond))
	ctx := Context(t, 30*time.Second)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"}, Data: map[string]string{"a": "b"}}
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 3}, {0.99, 5}, {0.2, 1}, {1, 5}} {
		if got := Percentile(ds, tt.p); got != tt.want {
			t.Errorf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if Percentile(nil, 0.5) != 0 || ds[0] != 5 {
		t.Error("Percentile of nothing is not 0, or the input was sorted in place")
	}
}
