// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// StartupHeld reports whether container c of pod waits for its startup probe, as the kubelet holds
// liveness and readiness: c has a startupProbe and the kubelet does not report it started (its
// startup probe has not succeeded yet, or it is not running). A container without a status yet is
// not held (the node service sees itself that it is not running), nor is one without a startup
// probe: it has started when it runs, so its entry stays through restarts (no two NodePodProbe
// writes and a late first probe per restart).
func StartupHeld(pod *corev1.Pod, c *corev1.Container) bool {
	if c.StartupProbe == nil {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == c.Name {
				return list[i].Started == nil || !*list[i].Started
			}
		}
	}
	return false
}

// StartedChanged passes the pod updates in which StartupHeld changed for a container: the
// kubelet's started flag of a container that has a startup probe. Other status updates do not pass.
func StartedChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, ok1 := e.ObjectOld.(*corev1.Pod)
		cur, ok2 := e.ObjectNew.(*corev1.Pod)
		return !ok1 || !ok2 || !maps.Equal(startupHeld(old), startupHeld(cur))
	}}
}

// startupHeld maps the names of pod's containers that have a startup probe to StartupHeld; nil
// (no allocation: this runs on every pod update) when none has one.
func startupHeld(pod *corev1.Pod) map[string]bool {
	var out map[string]bool
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].StartupProbe == nil {
				continue
			}
			if out == nil {
				out = map[string]bool{}
			}
			out[list[i].Name] = StartupHeld(pod, &list[i])
		}
	}
	return out
}
