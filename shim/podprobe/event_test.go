// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"fmt"
	"io"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// capture records events with the field path of their object.
type capture []string

func (c *capture) Event(o runtime.Object, typ, reason, message string) {
	*c = append(*c, fmt.Sprintf("%s %s [%s] %s", typ, reason, o.(*corev1.ObjectReference).FieldPath, message))
}

// Events are written where a person acts: a marker probe's failures and recoveries (OpenKruise's
// reasons), not its first success; enhanced liveness as the kubelet says it (Unhealthy "Liveness
// probe failed: ..." on the container), and nothing when it succeeds.
func TestEvents(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	pod := podMeta{uid: "u1", namespace: "ns", name: "web-0"}
	live := v1alpha1.LivenessProbeName("app")
	for _, tt := range []struct {
		name string
		t    transition
		want string // "" for no event
	}{
		{"a marker's first result, Succeeded", transition{pod: pod, probe: "m#idle", state: v1alpha1.ProbeSucceeded}, ""},
		{"a marker Succeeded after Unknown", transition{pod: pod, probe: "m#idle", prev: v1alpha1.ProbeUnknown, state: v1alpha1.ProbeSucceeded}, ""},
		{"a marker's first result, Failed", transition{pod: pod, probe: "m#idle", state: v1alpha1.ProbeFailed, message: "exit 1"},
			"Warning KruiseProbeFailed [] probe m#idle: Failed: exit 1"},
		{"a marker recovers", transition{pod: pod, probe: "m#idle", prev: v1alpha1.ProbeFailed, state: v1alpha1.ProbeSucceeded, message: "idle"},
			"Normal KruiseProbeSucceeded [] probe m#idle: Succeeded: idle"},
		{"enhanced liveness fails", transition{pod: pod, probe: live, prev: v1alpha1.ProbeSucceeded, state: v1alpha1.ProbeFailed, message: "HTTP probe failed with statuscode: 500"},
			"Warning Unhealthy [spec.containers{app}] Liveness probe failed: HTTP probe failed with statuscode: 500"},
		{"enhanced liveness recovers", transition{pod: pod, probe: live, prev: v1alpha1.ProbeFailed, state: v1alpha1.ProbeSucceeded}, ""},
	} {
		var got capture
		c := New(Config{Node: "n1", Events: &got, Log: log})
		c.event(&tt.t)
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("%s: events %q, want none", tt.name, got)
		case tt.want != "" && (len(got) != 1 || got[0] != tt.want):
			t.Errorf("%s: events %q, want %q", tt.name, got, tt.want)
		}
	}
}
