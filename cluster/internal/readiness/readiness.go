// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package readiness reads the Ready conditions of nodes and pods, the one way every controller of
// the cluster part reads them.
package readiness

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// NodeCondition is the node's Ready condition, nil while it has none (a node just registered).
func NodeCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// Node says whether the node is Ready: its Ready condition is True.
func Node(n *corev1.Node) bool {
	c := NodeCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

// NodeNotReady says why the node is not Ready, as the node lifecycle controller sees it, or ""
// when it is, or has no Ready condition yet (nothing is known against it).
func NodeNotReady(n *corev1.Node) string {
	if c := NodeCondition(n); c != nil && c.Status != corev1.ConditionTrue {
		return fmt.Sprintf("node %s is not Ready (%s: %s)", n.Name, c.Reason, c.Message)
	}
	return ""
}

// Pod says whether the pod is Ready: its Ready condition is True.
func Pod(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
