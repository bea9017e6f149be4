// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package readiness

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNode(t *testing.T) {
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	pressure := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}
	for _, tt := range []struct {
		name     string
		node     *corev1.Node
		ready    bool
		notReady string
	}{
		{"no condition yet: not Ready, nothing known against it", node(), false, ""},
		{"Ready", node(pressure, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}), true, ""},
		{"Unknown", node(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
			Message: "Kubelet stopped posting node status."}), false, "node n1 is not Ready (NodeStatusUnknown: Kubelet stopped posting node status.)"},
	} {
		if got := Node(tt.node); got != tt.ready {
			t.Errorf("%s: Node %v, want %v", tt.name, got, tt.ready)
		}
		if got := NodeNotReady(tt.node); got != tt.notReady {
			t.Errorf("%s: NodeNotReady %q, want %q", tt.name, got, tt.notReady)
		}
	}
}

func TestPod(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	if Pod(pod) {
		t.Error("a pod whose Ready condition is False reads Ready")
	}
	pod.Status.Conditions[1].Status = corev1.ConditionTrue
	if !Pod(pod) {
		t.Error("a pod whose Ready condition is True reads not Ready")
	}
	if Pod(&corev1.Pod{}) {
		t.Error("a pod without conditions reads Ready")
	}
}
