// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package controller_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// TestHeldWhileKruiseProbes: while OpenKruise's probe path is live the controllers write no
// NodePodProbe, no PodProbeMarker status and no pod; once it is gone they do the work.
func TestHeldWhileKruiseProbes(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	heldProbes.Store("kruise-daemon prober is live")
	t.Cleanup(func() { heldProbes.Store("") })
	mark := env.Writes.Len()

	node := env.Node(t, true)
	// Kruise's NodePodProbe of the node (no owner reference), with a result of its daemon.
	kruiseNPP := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node.Name},
		Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: "other", Namespace: ns, UID: "uid-other",
			Probes: []v1alpha1.ContainerProbe{{Name: "m#p", ContainerName: "c",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}}}}}}
	if err := env.Client.Create(ctx, kruiseNPP); err != nil {
		t.Fatal(err)
	}
	kruiseNPP.Status.PodProbeStatuses = []v1alpha1.PodProbeStatus{{Name: "other", Namespace: ns, UID: "uid-other",
		ProbeStates: []v1alpha1.ContainerProbeState{{Name: "m#p", State: v1alpha1.ProbeSucceeded}}}}
	if err := env.Client.Status().Update(ctx, kruiseNPP); err != nil {
		t.Fatal(err)
	}
	marker := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "held"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "ok", ContainerName: "main", PodConditionType: "example.com/ok",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}},
		},
	}
	if err := env.Client.Create(ctx, marker); err != nil {
		t.Fatal(err)
	}
	probeContext, _ := v1alpha1.FormatContainerProbeContext([]v1alpha1.ContainerLivenessProbe{{Name: "main",
		LivenessProbe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}})
	pod := env.RunningPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held-0", Labels: map[string]string{"app": "held"},
			Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", v1alpha1.AnnotationContainerProbeContext: probeContext}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}, "10.10.0.9")

	// Held: nothing to poll for, so watch the writes for a while (unheld, the NodePodProbe comes
	// within well under a second: TestGameServerLifecycle).
	poll.Consistently(t, 2*time.Second, func() error {
		for _, w := range env.Writes.Since(mark) {
			if w.Kind == "NodePodProbe" || w.Kind == "PodProbeMarker" || (w.Kind == "Pod" && w.Namespace == ns) {
				return fmt.Errorf("held, but wrote %+v", w)
			}
		}
		return nil
	})

	// Released: the next event of each (here a touch of the marker and the pod; otherwise the
	// held reconciles' requeue) brings the work.
	heldProbes.Store("")
	for _, obj := range []interface {
		GetLabels() map[string]string
		SetLabels(map[string]string)
	}{marker, pod} {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["example.com/touched"] = "yes"
		obj.SetLabels(l)
	}
	if err := env.Client.Update(ctx, marker); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(node.Name, "held-0:held#ok,main-livenessProbe")) // Kruise's entry replaced
}
