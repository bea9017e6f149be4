// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// A pod may ask for a grace period no request may carry (validation bounds it, so that no
// Duration overflows): the decider's request says the most it may, and is not refused.
func TestGraceIsBounded(t *testing.T) {
	probes, err := v1alpha1.FormatContainerProbeContext([]v1alpha1.ContainerLivenessProbe{{Name: "app",
		LivenessProbe: corev1.Probe{TerminationGracePeriodSeconds: ptr.To(int64(7))}}})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.AnnotationContainerProbeContext: probes}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To(int64(math.MaxInt64 / 1000))}}
	if g := grace(pod, []Failure{{Container: "app"}}); ptr.Deref(g, 0) != 7 {
		t.Errorf("the probe's grace: %v", ptr.Deref(g, -1))
	}
	if g := grace(pod, []Failure{{Container: "other"}}); ptr.Deref(g, 0) != validation.MaxDurationSeconds {
		t.Errorf("the pod's huge grace became %v, want %d", ptr.Deref(g, -1), validation.MaxDurationSeconds)
	}
}
