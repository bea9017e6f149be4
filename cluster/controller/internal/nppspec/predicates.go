// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// PodPlacementChanged passes pod creations and deletions, and the updates that can change a
// pod's NodePodProbe entries: its node, IP, probeability, labels, or one of the annotations
// named. The kubelet's frequent status updates (container states, readiness) pass only when
// they change probeability, which keeps the queue quiet.
func PodPlacementChanged(annotations ...string) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*corev1.Pod)
			cur, ok2 := e.ObjectNew.(*corev1.Pod)
			if !ok1 || !ok2 {
				return true
			}
			if old.Spec.NodeName != cur.Spec.NodeName || old.Status.PodIP != cur.Status.PodIP ||
				Probeable(old) != Probeable(cur) || !maps.Equal(old.Labels, cur.Labels) {
				return true
			}
			for _, a := range annotations {
				if old.Annotations[a] != cur.Annotations[a] {
					return true
				}
			}
			return false
		},
	}
}

// UpdatesWhere passes only the updates for which changed(old, cur) holds: for a switch kept in an
// annotation or a label, which no new generation announces and no creation or deletion changes.
func UpdatesWhere(changed func(old, cur client.Object) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return changed(e.ObjectOld, e.ObjectNew) },
	}
}
