// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func crrRequest(t *testing.T, op admissionv1.Operation, crr any) admission.Request {
	t.Helper()
	raw, err := json.Marshal(crr)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Namespace: "ns", Object: runtime.RawExtension{Raw: raw}}}
}

func fakePods(pods ...*corev1.Pod) *ContainerRecreateRequestMutator {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, p := range pods {
		b = b.WithObjects(p)
	}
	return &ContainerRecreateRequestMutator{Pods: b.Build()}
}

func unitPod() *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p"},
		Spec: corev1.PodSpec{NodeName: "n1",
			InitContainers: []corev1.Container{
				{Name: "init", Image: "i"},
				{Name: "proxy", Image: "i", RestartPolicy: &always, Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
					Sleep: &corev1.SleepAction{Seconds: 5}}}},
			},
			Containers: []corev1.Container{{Name: "main", Image: "i"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", ContainerID: "containerd://i"}, {Name: "proxy", ContainerID: "containerd://s", RestartCount: 4}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://m"}}},
	}
}

// Sidecars are recreatable; a preStop sleep cannot be carried and is reported as a warning;
// the patch touches only what is injected.
func TestMutatorSidecarAndSleep(t *testing.T) {
	m := fakePods(unitPod())
	crr := map[string]any{"metadata": map[string]any{"name": "r"},
		"spec": map[string]any{"podName": "p", "containers": []any{map[string]any{"name": "proxy"}}}}
	resp := m.Handle(context.Background(), crrRequest(t, admissionv1.Create, crr))
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	var paths []string
	for _, p := range resp.Patches {
		paths = append(paths, p.Operation+" "+p.Path)
	}
	want := "add /metadata/labels add /spec/containers/0/statusContext add /spec/strategy"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("patches %q, want %q", got, want)
	}
	for _, p := range resp.Patches {
		if p.Path == "/spec/containers/0/statusContext" {
			if b, _ := json.Marshal(p.Value); string(b) != `{"containerID":"containerd://s","restartCount":4}` {
				t.Errorf("statusContext %s", b)
			}
		}
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "preStop sleep is not run") {
		t.Errorf("warnings %q", resp.Warnings)
	}

	// A plain init container is not recreatable.
	crr["spec"].(map[string]any)["containers"] = []any{map[string]any{"name": "init"}}
	resp = m.Handle(context.Background(), crrRequest(t, admissionv1.Create, crr))
	if resp.Allowed || !strings.Contains(resp.Result.Message, `supported values: "proxy", "main"`) {
		t.Errorf("init container: %+v", resp.Result)
	}
}

// The validator's CREATE checks catch a request the mutator did not complete (e.g. a
// configuration without the mutating webhook) or one another webhook changed afterwards.
func TestValidateAdmitted(t *testing.T) {
	pod := unitPod()
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", Labels: map[string]string{
			v1alpha1.LabelCRRPodUID: "uid-other", v1alpha1.LabelCRRActive: "true"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "p", Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}}},
	}
	var got []string
	for _, e := range validateAdmitted(crr, pod) {
		got = append(got, e.Error())
	}
	for _, want := range []string{
		`metadata.labels[crr.apps.kruise.io/pod-uid]: Invalid value: "uid-other": must be "uid-p", as for pod p`,
		`metadata.labels[crr.apps.kruise.io/node-name]: Required value: must be set by the probeshim admission webhook`,
		`spec.strategy.failurePolicy: Required value`,
		`spec.containers[0].statusContext: Required value`,
	} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("missing %q in\n%s", want, strings.Join(got, "\n"))
		}
	}
	if errs := validateAdmitted(crr, nil); len(errs) != 1 || !strings.Contains(errs[0].Error(), "pod p does not exist in namespace ns") {
		t.Errorf("missing pod: %v", errs)
	}

	crr.Labels = map[string]string{v1alpha1.LabelCRRPodUID: "uid-p", v1alpha1.LabelCRRNodeName: "n1", v1alpha1.LabelCRRActive: "true"}
	crr.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail,
		MinStartedSeconds: 1, TerminationGracePeriodSeconds: ptr.To[int64](3)}
	crr.Spec.Containers[0].StatusContext = &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://m"}
	if errs := validateAdmitted(crr, pod); len(errs) != 0 {
		t.Errorf("complete request: %v", errs)
	}
}

// Only requests still at work count against probeshim.io/crr-concurrency: Forbid: a completed
// request whose active label is not removed yet, or one being deleted, does not.
func TestActiveRequest(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	pod := unitPod()
	req := func(name string, mut func(*v1alpha1.ContainerRecreateRequest)) *v1alpha1.ContainerRecreateRequest {
		c := &v1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{v1alpha1.LabelCRRPodUID: "uid-p", v1alpha1.LabelCRRActive: "true"}}}
		mut(c)
		return c
	}
	done := req("done", func(c *v1alpha1.ContainerRecreateRequest) {
		c.Status.Phase = v1alpha1.ContainerRecreateRequestCompleted
	})
	going := req("going", func(c *v1alpha1.ContainerRecreateRequest) {
		now := metav1.Now()
		c.DeletionTimestamp, c.Finalizers = &now, []string{"example.com/hold"}
	})
	other := req("other-pod", func(c *v1alpha1.ContainerRecreateRequest) { c.Labels[v1alpha1.LabelCRRPodUID] = "uid-q" })
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(done, going, other).Build()
	if name, err := activeRequest(context.Background(), r, pod); err != nil || name != "" {
		t.Fatalf("activeRequest = %q, %v; want none", name, err)
	}
	r = fake.NewClientBuilder().WithScheme(scheme).WithObjects(done, going, other,
		req("working", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Status.Phase = v1alpha1.ContainerRecreateRequestRecreating
		})).Build()
	if name, err := activeRequest(context.Background(), r, pod); err != nil || name != "working" {
		t.Fatalf("activeRequest = %q, %v; want working", name, err)
	}
}
