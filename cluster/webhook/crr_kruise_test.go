// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// While OpenKruise carries out requests, a request is admitted as sent (here with what Kruise's
// own webhook injects, which probeshim's checks would refuse), labelled for kruise-daemon; once
// Kruise is gone the label is probeshim admission's to remove.
func TestMutatorHandsRequestsToKruise(t *testing.T) {
	held := "kruise-daemon ContainerRecreateRequest executor is live"
	m := fakePods(unitPod())
	m.Hold = func() string { return held }
	crr := map[string]any{"metadata": map[string]any{"name": "r"},
		"spec": map[string]any{"podName": "p", "containers": []any{map[string]any{"name": "main",
			"statusContext": map[string]any{"containerID": "containerd://m", "restartCount": 0}}}}}
	resp := m.Handle(context.Background(), crrRequest(t, admissionv1.Create, crr))
	if !resp.Allowed {
		t.Fatalf("held: denied %+v", resp.Result)
	}
	if len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/labels" {
		t.Fatalf("held: patches %+v, want only the executor label", resp.Patches)
	}
	if b, _ := json.Marshal(resp.Patches[0].Value); string(b) != `{"probeshim.io/crr-executor":"kruise"}` {
		t.Errorf("held: labels %s", b)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], held) {
		t.Errorf("held: warnings %q", resp.Warnings)
	}
	v := &ContainerRecreateRequestValidator{Pods: m.Pods, Hold: m.Hold}
	if r := v.Handle(context.Background(), crrRequest(t, admissionv1.Create, crr)); !r.Allowed {
		t.Errorf("held: the validator refused a request Kruise checks: %+v", r.Result)
	}

	// Not held: probeshim admits it, and a label the user set does not hide it from the nodes.
	held = ""
	crr["spec"].(map[string]any)["containers"] = []any{map[string]any{"name": "main"}}
	crr["metadata"].(map[string]any)["labels"] = map[string]any{v1alpha1.LabelCRRExecutor: v1alpha1.CRRExecutorKruise}
	resp = m.Handle(context.Background(), crrRequest(t, admissionv1.Create, crr))
	if !resp.Allowed {
		t.Fatalf("not held: denied %+v", resp.Result)
	}
	removed := false
	for _, p := range resp.Patches {
		if p.Operation == "remove" && strings.Contains(p.Path, "crr-executor") {
			removed = true
		}
	}
	if !removed {
		t.Errorf("not held: the executor label stays: %+v", resp.Patches)
	}
}

// The executor label can be removed (adoption) but not added after creation.
func TestExecutorLabelOnlyRemoved(t *testing.T) {
	obj := func(labels map[string]string) *v1alpha1.ContainerRecreateRequest {
		return &v1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Labels: labels}}
	}
	kr := map[string]string{v1alpha1.LabelCRRExecutor: v1alpha1.CRRExecutorKruise}
	if errs := ValidateContainerRecreateRequestUpdate(obj(nil), obj(kr)); len(errs) != 0 {
		t.Errorf("removing: %v", errs)
	}
	if errs := ValidateContainerRecreateRequestUpdate(obj(kr), obj(nil)); len(errs) != 1 {
		t.Errorf("adding: %v", errs)
	}
}

// While OpenKruise owns the NodePodProbes nothing would run a moved liveness probe: the pod keeps
// it for the kubelet, with a warning saying why.
func TestLivenessMutatorHeld(t *testing.T) {
	pod := `{"metadata":{"name":"gs-0","annotations":{"apps.kruise.io/using-enhanced-liveness":"true"}},"spec":{"containers":[
		{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["cat","/tmp/ok"]}}}]}}`
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: "ns",
		Object: runtime.RawExtension{Raw: []byte(pod)}}}
	held := "kruise-daemon prober is live"
	m := LivenessMutator{Hold: func() string { return held }}
	resp := m.Handle(context.Background(), req)
	if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], held) {
		t.Errorf("held: allowed=%v patches=%v warnings=%q", resp.Allowed, resp.Patches, resp.Warnings)
	}
	held = ""
	if resp := m.Handle(context.Background(), req); !resp.Allowed || len(resp.Patches) == 0 {
		t.Errorf("not held: allowed=%v patches=%v (%+v)", resp.Allowed, resp.Patches, resp.Result)
	}
}
