// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/liveness"
	"github.com/probeshim/probeshim/cluster/decider"
)

// explain prints, from a real API server, a pod's enhanced liveness: the condition, the restart
// record and the decider's latest decisions, newest first; another pod's events are not shown.
// It is kubectl probeshim explain's code (cluster/plugin, tested further in cluster/plugin/cli).
func TestExplain(t *testing.T) {
	cfg, _ := startAPIServer(t)
	kc := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0", Annotations: map[string]string{
		v1alpha1.AnnotationUsingEnhancedLiveness: "true", v1alpha1.AnnotationServedNodeAffinity: "require",
		v1alpha1.AnnotationContainerProbeContext: `[{"name":"app","livenessProbe":{"tcpSocket":{"port":80}}}]`,
		decider.AnnotationRestarts:               `{"containers":{"app":{"failure":"2026-12-03T10:00:00Z","restarts":2,"lastRestart":"2026-12-03T10:00:05.000000Z"}}}`,
	}}, Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	pod, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: liveness.ConditionLivenessProtected, Status: corev1.ConditionFalse,
		Reason: liveness.ReasonNodeServiceSilent, Message: "the probeshim node service on node n1 is silent", LastTransitionTime: metav1.Now()},
		{Type: decider.ConditionLivenessRestart, Status: corev1.ConditionFalse, Reason: string(decider.ReasonMaxUnavailable),
			Message: "held of container app: PodDisruptionBudget default/web allows no more disruptions", LastTransitionTime: metav1.Now()}}
	if _, err := kc.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := pod.DeepCopy()
	other.UID = "another-pod"
	for i, e := range []struct {
		reason, note string
		about        *corev1.Pod
	}{
		{decider.EventReasonRestart, "liveness probe failed: app", pod},
		{decider.EventReasonHeld, "\x1b[31mheld\x1b[0m (NodeServiceSilent)", pod},
		{decider.EventReasonHeld, "of an older pod of the same name", other},
	} {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "web-0-"},
			EventTime: metav1.NewMicroTime(time.Now().Add(time.Duration(i) * time.Second)), ReportingController: "probeshim",
			ReportingInstance: "probeshim-1", Action: "Decide", Reason: e.reason, Note: e.note, Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", UID: e.about.UID}}
		if _, err := kc.EventsV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var out, errOut bytes.Buffer
	if code := runExplain(ctx, []string{"default/web-0"}, &out, &errOut, func() (*rest.Config, error) { return cfg, nil }); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"opted in; probeshim runs the liveness probes of app",
		"require (node label node-restriction.kubernetes.io/probeshim-served)",
		"probeshim.io/LivenessProtected:  False (NodeServiceSilent)",
		"probeshim.io/LivenessRestart:    False (MaxUnavailable)", "PodDisruptionBudget default/web allows no more disruptions",
		"Restarts of app:", "2, the last at 2026-12-03T10:00:05Z for the failure since 2026-12-03T10:00:00Z",
		`LivenessRestartHeld  \x1b[31mheld\x1b[0m (NodeServiceSilent)`,
		"Node:     n1 (no such Node)", "app-livenessProbe  app        -      NotPlaced  -           the pod is not ready to be probed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if held, restart := strings.Index(got, "LivenessRestartHeld"), strings.Index(got, "LivenessRestart "); held < 0 || restart < held {
		t.Errorf("decisions not newest first:\n%s", got)
	}
	if strings.Contains(got, "older pod") {
		t.Errorf("another pod's event shown:\n%s", got)
	}
	if code := runExplain(ctx, []string{"default/nope"}, &out, &errOut, func() (*rest.Config, error) { return cfg, nil }); code != 1 ||
		!strings.Contains(errOut.String(), `pod default/nope: pods "nope" not found`) {
		t.Errorf("a missing pod: exit %d, %q", code, errOut.String())
	}
	if code := runExplain(ctx, []string{"web-0"}, &out, &errOut, nil); code != 2 {
		t.Errorf("no namespace: exit %d", code)
	}
}
