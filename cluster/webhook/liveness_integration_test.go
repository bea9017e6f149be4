// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func livenessPod(ns, name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "main", Image: "busybox", LivenessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
				PeriodSeconds: 5, FailureThreshold: 3,
			}},
			{Name: "log", Image: "busybox"},
			{Name: "web", Image: "nginx",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}},
			},
		}},
	}
}

var optIn = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}

// The mutating webhook's output on a real pod CREATE: the API server defaults the probes before
// calling the webhook, so the annotation holds them with their defaults, exactly.
func TestLivenessWebhookOnPodCreate(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	pod := livenessPod("games", "gs-0", optIn)
	if err := testEnv.admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Spec.Containers {
		if c.LivenessProbe != nil {
			t.Errorf("container %s still has a livenessProbe", c.Name)
		}
	}
	want := `[{"name":"main","livenessProbe":{"exec":{"command":["cat","/tmp/healthy"]},"timeoutSeconds":1,"periodSeconds":5,"successThreshold":1,"failureThreshold":3}},` +
		`{"name":"web","livenessProbe":{"httpGet":{"path":"/healthz","port":"http","scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3}}]`
	if a := got.Annotations[v1alpha1.AnnotationContainerProbeContext]; a != want {
		t.Errorf("annotation\n got: %s\nwant: %s", a, want)
	}
	if got.Annotations[v1alpha1.AnnotationUsingEnhancedLiveness] != "true" {
		t.Error("opt-in annotation lost")
	}
}

// Through the API server: an opted-in pod requires a served node; a namespace annotated prefer
// makes its pods prefer one, and a pod's own annotation wins over its namespace's.
func TestLivenessWebhookServedNodes(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "served-prefer",
		Annotations: map[string]string{v1alpha1.AnnotationServedNodeAffinity: v1alpha1.ServedNodePrefer}}}
	if err := testEnv.admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = testEnv.admin.Delete(context.Background(), ns) })
	create := func(ns, name string, annotations map[string]string) *corev1.Pod {
		t.Helper()
		a := maps.Clone(optIn)
		maps.Copy(a, annotations)
		pod := livenessPod(ns, name, a)
		if err := testEnv.admin.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	required := func(p *corev1.Pod) bool {
		a := p.Spec.Affinity
		return a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil &&
			fmt.Sprint(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == fmt.Sprint([]corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{servedNode}}})
	}
	preferred := func(p *corev1.Pod) bool {
		a := p.Spec.Affinity
		return a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 1 &&
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil
	}
	if p := create("games", "served-default", nil); !required(p) || p.Annotations[v1alpha1.AnnotationServedNodeAffinity] != "require" {
		t.Errorf("default: affinity %+v, annotations %v", p.Spec.Affinity, p.Annotations)
	}
	if p := create("served-prefer", "from-namespace", nil); !preferred(p) || p.Annotations[v1alpha1.AnnotationServedNodeAffinity] != "prefer" {
		t.Errorf("namespace prefer: affinity %+v, annotations %v", p.Spec.Affinity, p.Annotations)
	}
	if p := create("served-prefer", "pod-wins", map[string]string{v1alpha1.AnnotationServedNodeAffinity: "require"}); !required(p) {
		t.Errorf("pod require in a prefer namespace: affinity %+v", p.Spec.Affinity)
	}
}

// Pods that did not opt in are never sent to the webhook (matchConditions), and the system
// namespaces are out of its reach (namespaceSelector): the webhook being down cannot block them.
func TestLivenessWebhookScope(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	before := testEnv.calls.get(PathPodLiveness)

	plain := livenessPod("games", "plain", map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "false"})
	system := livenessPod(systemNamespace, "own", optIn)
	for _, p := range []*corev1.Pod{plain, system} {
		if err := testEnv.admin.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		got := &corev1.Pod{}
		if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Containers[0].LivenessProbe == nil || got.Annotations[v1alpha1.AnnotationContainerProbeContext] != "" {
			t.Errorf("%s/%s was mutated", p.Namespace, p.Name)
		}
	}
	if n := testEnv.calls.get(PathPodLiveness) - before; n != 0 {
		t.Errorf("the webhook was called %d times for pods it must not see", n)
	}

	if err := testEnv.admin.Create(ctx, livenessPod("games", "opted", optIn)); err != nil {
		t.Fatal(err)
	}
	if n := testEnv.calls.get(PathPodLiveness) - before; n != 1 {
		t.Errorf("the webhook was called %d times for one opted-in pod", n)
	}
}

// A probe probeshim cannot run is rejected with the reason, not dropped.
func TestLivenessWebhookRejects(t *testing.T) {
	needEnv(t)
	pod := livenessPod("games", "bad", optIn)
	// The API server accepts any host; probeshim probes the pod only.
	pod.Spec.Containers[2].LivenessProbe.HTTPGet.Host = "169.254.169.254"
	err := testEnv.admin.Create(context.Background(), pod)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	for _, want := range []string{
		`admission webhook "enhanced-liveness.pods.probeshim.io" denied the request`,
		"games/bad", "apps.kruise.io/using-enhanced-liveness",
		"spec.containers[2].livenessProbe.httpGet.host", "must be empty (the probe goes to the pod's IP)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
