// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

// skip is a marker probe that could not be placed on a pod, with the reason.
type skip struct {
	marker *v1alpha1.PodProbeMarker
	pod    *corev1.Pod
	probe  string
	reason string
}

// key identifies a skip for deduplicating its event.
func (s skip) key() string {
	return fmt.Sprintf("%s/%s/%s#%s/%s", s.marker.Namespace, s.marker.UID, s.marker.Name, s.probe, s.pod.UID)
}

// markerProbes returns the NodePodProbe probes of marker m for pod, named "<marker>#<probe>" with
// named ports resolved, and the probes it had to skip: no such container, an unknown port name,
// a probe the NodePodProbe admission would refuse (e.g. a marker written before the webhook
// ran), or a network probe of a hostNetwork pod to a port the pod does not declare. The caller checks that m selects the pod.
// A probe of a container that waits for its startup probe (nppspec.StartupHeld) is neither: it
// comes once the kubelet reports the container started, as the kubelet's own readiness probe does.
func markerProbes(m *v1alpha1.PodProbeMarker, pod *corev1.Pod) ([]v1alpha1.ContainerProbe, []skip) {
	var out []v1alpha1.ContainerProbe
	var skipped []skip
	for i := range m.Spec.Probes {
		p := &m.Spec.Probes[i]
		c := v1alpha1.RestartableContainer(pod, p.ContainerName)
		if c == nil {
			skipped = append(skipped, skip{marker: m, pod: pod, probe: p.Name,
				reason: fmt.Sprintf("pod has no container %q", p.ContainerName)})
			continue
		}
		if nppspec.StartupHeld(pod, c) {
			continue
		}
		probe, err := nppspec.ResolvePorts(&p.Probe.Probe, c)
		if err == nil {
			err = nppspec.CheckProbe(probe, pod.Status.PodIP, false, field.NewPath("spec", "probes").Index(i).Child("probe"))
		}
		if err == nil {
			err = nppspec.CheckHostNetwork(probe, pod)
		}
		if err != nil {
			skipped = append(skipped, skip{marker: m, pod: pod, probe: p.Name, reason: err.Error()})
			continue
		}
		// A marker stored before its webhook checked the annotation may hold other commands:
		// those run as the execs they are.
		_, readsFile := v1alpha1.ExecFreePath(probe)
		out = append(out, v1alpha1.ContainerProbe{
			Name:          v1alpha1.ProbeName(m.Name, p.Name),
			ContainerName: p.ContainerName,
			Probe:         v1alpha1.ContainerProbeSpec{Probe: *probe},
			ExecFree:      readsFile && v1alpha1.ExecFree(m),
		})
	}
	return out, skipped
}

// desiredEntries is the marker part of a node's NodePodProbe spec: for every probeable pod of
// pods, the probes of every marker that selects it. markers may hold markers of any namespace.
// The result is canonical (see nppspec.Canonical).
func desiredEntries(pods []corev1.Pod, markers []v1alpha1.PodProbeMarker) ([]v1alpha1.PodProbe, []skip) {
	// Live markers by namespace, each selector parsed once for all the node's pods.
	type live struct {
		m   *v1alpha1.PodProbeMarker
		sel labels.Selector
	}
	byNS := map[string][]live{}
	for i := range markers {
		if m := &markers[i]; m.DeletionTimestamp == nil {
			byNS[m.Namespace] = append(byNS[m.Namespace], live{m, nppspec.MarkerSelector(m)})
		}
	}
	var out []v1alpha1.PodProbe
	var skipped []skip
	for i := range pods {
		pod := &pods[i]
		if !nppspec.Probeable(pod) {
			continue
		}
		entry := v1alpha1.PodProbe{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), IP: pod.Status.PodIP}
		for _, l := range byNS[pod.Namespace] {
			m := l.m
			if !l.sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			probes, s := markerProbes(m, pod)
			entry.Probes = append(entry.Probes, probes...)
			skipped = append(skipped, s...)
		}
		if len(entry.Probes) > 0 {
			out = append(out, entry)
		}
	}
	return nppspec.Canonical(out), skipped
}
