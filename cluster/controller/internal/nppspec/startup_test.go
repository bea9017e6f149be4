// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestStartedChanged(t *testing.T) {
	pod := func(slowStarted, fastStarted *bool) *corev1.Pod {
		return &corev1.Pod{
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "slow", StartupProbe: &corev1.Probe{}},
				{Name: "fast"},
			}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
				{Name: "slow", Started: slowStarted}, {Name: "fast", Started: fastStarted},
			}},
		}
	}
	p := StartedChanged()
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Pod
		want     bool
	}{
		{"the container with a startup probe starts", pod(ptr.To(false), ptr.To(true)), pod(ptr.To(true), ptr.To(true)), true},
		{"it restarts", pod(ptr.To(true), ptr.To(true)), pod(ptr.To(false), ptr.To(true)), true},
		{"no status yet to not started: held either way", pod(nil, nil), pod(ptr.To(false), nil), false},
		{"a container without a startup probe starts", pod(ptr.To(true), ptr.To(false)), pod(ptr.To(true), ptr.To(true)), false},
		{"nothing changes", pod(ptr.To(true), ptr.To(true)), pod(ptr.To(true), ptr.To(true)), false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}); got != tc.want {
			t.Errorf("%s: passes %v, want %v", tc.name, got, tc.want)
		}
	}
	if held := StartupHeld(pod(ptr.To(false), nil), &corev1.Container{Name: "fast"}); held {
		t.Error("a container without a startup probe is held")
	}
}

// The predicate runs on every pod update of two controllers; pods without a startup probe, most of
// them, must cost no allocation.
func TestStartedChangedWithoutStartupProbesAllocatesNothing(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "sidecar"}}}}
	e := event.UpdateEvent{ObjectOld: pod, ObjectNew: pod.DeepCopy()}
	p := StartedChanged()
	if n := testing.AllocsPerRun(100, func() { p.Update(e) }); n != 0 {
		t.Errorf("%v allocations per update, want 0", n)
	}
}
