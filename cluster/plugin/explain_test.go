// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package plugin

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func TestWhyNotPlacedStartup(t *testing.T) {
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "app", StartupProbe: &corev1.Probe{}}, {Name: "side"},
		}},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Started: ptr.To(false)}, {Name: "side", Started: ptr.To(false)}}},
	}
	npp := &v1alpha1.NodePodProbe{}
	if got := whyNotPlaced(pod, "app", npp, nil); !strings.Contains(got, "startupProbe that has not succeeded yet") {
		t.Errorf("app, waiting for its startup probe: %q", got)
	}
	if got := whyNotPlaced(pod, "side", npp, nil); strings.Contains(got, "startupProbe") {
		t.Errorf("side, without a startup probe: %q", got)
	}
	pod.Status.ContainerStatuses[0].Started = ptr.To(true)
	if got := whyNotPlaced(pod, "app", npp, nil); strings.Contains(got, "startupProbe") {
		t.Errorf("app, started: %q", got)
	}
}
