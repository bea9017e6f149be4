// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

func patchPaths(ops []jsonpatch.JsonPatchOperation) map[string]any {
	out := map[string]any{}
	for _, op := range ops {
		out[op.Path] = op.Value
	}
	return out
}

func TestPodProbeMarkerDefaulter(t *testing.T) {
	timed := tcpProbe("up", 80)
	timed.Probe.PeriodSeconds, timed.Probe.FailureThreshold = 10, 3
	full := tcpProbe("full", 80)
	full.Probe.Probe = corev1.Probe{ProbeHandler: full.Probe.ProbeHandler,
		InitialDelaySeconds: 5, TimeoutSeconds: 2, PeriodSeconds: 3, SuccessThreshold: 1, FailureThreshold: 4}

	// Create: every empty field of every probe, nothing the user set.
	resp := PodProbeMarkerDefaulter{}.Handle(context.Background(),
		markerRequest(t, admissionv1.Create, marker(tcpProbe("idle", 80), timed, full), nil))
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	got := patchPaths(resp.Patches)
	want := map[string]any{
		"/spec/probes/0/probe/initialDelaySeconds": 1, "/spec/probes/0/probe/timeoutSeconds": 1,
		"/spec/probes/0/probe/periodSeconds": 1, "/spec/probes/0/probe/successThreshold": 1,
		"/spec/probes/0/probe/failureThreshold":    1,
		"/spec/probes/1/probe/initialDelaySeconds": 1, "/spec/probes/1/probe/timeoutSeconds": 1,
		"/spec/probes/1/probe/successThreshold": 1,
	}
	if len(got) != len(want) {
		t.Fatalf("patches %v\nwant %v", got, want)
	}
	for k, v := range want {
		b, _ := json.Marshal(got[k])
		if string(b) != "1" || v != 1 {
			t.Errorf("%s = %s, want 1", k, b)
		}
	}

	// Update: a probe unchanged since before keeps its (empty) timing; a changed one is defaulted.
	old := marker(tcpProbe("idle", 80), tcpProbe("busy", 80))
	resp = PodProbeMarkerDefaulter{}.Handle(context.Background(),
		markerRequest(t, admissionv1.Update, marker(tcpProbe("idle", 80), tcpProbe("busy", 81)), old))
	got = patchPaths(resp.Patches)
	if len(got) != 5 {
		t.Fatalf("update patches %v, want the 5 fields of spec.probes[1] only", got)
	}
	for k := range got {
		if k[:len("/spec/probes/1/")] != "/spec/probes/1/" {
			t.Errorf("update patched %s", k)
		}
	}
}
