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
	"github.com/probeshim/probeshim/prober"
)

// capture records events with the field path of their object.
type capture []string

func (c *capture) Event(o runtime.Object, typ, reason, message string) {
	*c = append(*c, fmt.Sprintf("%s %s [%s] %s", typ, reason, o.(*corev1.ObjectReference).FieldPath, message))
}

// Events are written where a person acts: a marker probe's failures and recoveries (OpenKruise's
// reasons), not its first success; enhanced liveness as the kubelet says it (Unhealthy "Liveness
// probe failed: ..." on the container), and nothing when it succeeds; a probe that cannot run as
// a ProbeError with its reason.
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
		{"a marker cannot run", transition{pod: pod, probe: "m#idle", prev: v1alpha1.ProbeUnknown, state: v1alpha1.ProbeUnknown,
			reason: "CommandNotFound", message: `exec: "nc": executable file not found in $PATH`},
			`Warning ProbeError [] m#idle probe errored (CommandNotFound): exec: "nc": executable file not found in $PATH`},
		{"enhanced liveness cannot run", transition{pod: pod, probe: live, prev: v1alpha1.ProbeSucceeded, state: v1alpha1.ProbeUnknown,
			reason: "NetworkNamespaceGone", message: "no dialer for pod: network namespace not found"},
			"Warning ProbeError [spec.containers{app}] Liveness probe errored (NetworkNamespaceGone): no dialer for pod: network namespace not found"},
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

// A probe that keeps failing to run for one reason is one ProbeError event, however often the
// engine says so (its text may change: a late start); a new reason is another.
func TestProbeErrorEventOnChangeOnly(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	var got capture
	c := New(Config{Node: "n1", Events: &got, Log: log})
	c.pods[web.uid] = web
	c.probes[prober.Key{PodUID: web.uid, Container: "c", Probe: "m#idle"}] = "exec"
	c.apply(update("m#idle", prober.Unknown, "", t0))
	for i := range 3 {
		c.apply(probeErr("m#idle", prober.ReasonCommandNotFound, fmt.Sprintf("not found (started %ds late: the node's exec pool was full)", i+2), t0))
	}
	c.apply(probeErr("m#idle", prober.ReasonPermissionDenied, "permission denied", t0))
	want := []string{
		"Warning ProbeError [] m#idle probe errored (CommandNotFound): not found (started 2s late: the node's exec pool was full)",
		"Warning ProbeError [] m#idle probe errored (PermissionDenied): permission denied",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
