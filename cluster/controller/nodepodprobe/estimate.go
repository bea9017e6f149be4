// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

// MarkerEstimate is what one marker would place on one node, and whether the node would keep it.
type MarkerEstimate struct {
	// Pods and Probes count the pod entries and probes the marker would place.
	Pods, Probes int
	// Bytes is their estimated cost in the node's NodePodProbe (see Budget).
	Bytes int
	// NodeBytes is what the node's enhanced liveness probes and every marker it keeps would cost
	// with the marker's probes in place of its current ones.
	NodeBytes int
	// Skipped lists the probes that could not be placed on a pod, and why.
	Skipped []string
	// LeftOut says why the node would leave the marker out over its budget ("" when it fits).
	LeftOut string
}

// EstimateMarker places marker m on pods (the pods of one node that m selects) beside the node's
// NodePodProbe npp as it is now (nil when it has none), in place of m's probes there, and fits
// the node's markers into budget bytes as the controller does: enhanced liveness probes first,
// then markers by their namespaces' fair shares. The other markers count as npp holds them now,
// so one that the node leaves out today is not counted: the estimate errs towards fitting.
func EstimateMarker(m *v1alpha1.PodProbeMarker, pods []corev1.Pod, npp *v1alpha1.NodePodProbe, node string, budget int) MarkerEstimate {
	var current []v1alpha1.PodProbe
	if npp != nil {
		current = npp.Spec.PodProbes
	}
	self := nppspec.Load{Namespace: m.Namespace, Name: m.Name}
	entries := slices.Clone(without(current, []nppspec.LeftOut{{Load: self}}))
	var est MarkerEstimate
	for i := range pods {
		pod := &pods[i]
		if !nppspec.Probeable(pod) || !nppspec.SelectorMatches(m, pod) {
			continue
		}
		probes, skipped := markerProbes(m, pod)
		for _, s := range skipped {
			est.Skipped = append(est.Skipped, s.pod.Name+": probe "+s.probe+": "+s.reason)
		}
		if len(probes) == 0 {
			continue
		}
		est.Pods++
		est.Probes += len(probes)
		entries = append(entries, v1alpha1.PodProbe{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID),
			IP: pod.Status.PodIP, Probes: probes})
	}
	liveness := nppspec.EntriesCost(current, nppspec.LivenessProbes)
	loads := markerLoads(entries)
	out := nppspec.Fit(loads, budget-liveness)
	est.NodeBytes = liveness
	for _, l := range loads {
		if l.Key() == self.Key() {
			est.Bytes = l.Bytes
		}
		if !slices.ContainsFunc(out, func(o nppspec.LeftOut) bool { return o.Key() == l.Key() }) {
			est.NodeBytes += l.Bytes
		}
	}
	for _, l := range out {
		if l.Key() == self.Key() {
			est.LeftOut = leftOutReason(l, node, budget)
		}
	}
	return est
}

// Probeable reports whether the controller gives pod NodePodProbe entries now: bound, initialised,
// with an IP, neither finished nor terminating.
func Probeable(pod *corev1.Pod) bool { return nppspec.Probeable(pod) }

// StartupHeld reports whether the probes of container c of pod wait for its startup probe (see
// nppspec.StartupHeld).
func StartupHeld(pod *corev1.Pod, c *corev1.Container) bool { return nppspec.StartupHeld(pod, c) }

// MarkerSelector is the pod selector of m as the controller applies it: an empty or invalid one
// selects nothing.
func MarkerSelector(m *v1alpha1.PodProbeMarker) labels.Selector { return nppspec.MarkerSelector(m) }
