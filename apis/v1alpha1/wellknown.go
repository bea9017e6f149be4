// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pod annotations of the enhanced liveness probe.
const (
	// AnnotationUsingEnhancedLiveness set to "true" on a pod hands its containers' liveness probes
	// to probeshim: the webhook removes them from the containers, so the kubelet no longer restarts
	// on its own, and the liveness decider restarts through ContainerRecreateRequests instead.
	AnnotationUsingEnhancedLiveness = "apps.kruise.io/using-enhanced-liveness"
	// AnnotationContainerProbeContext keeps the removed liveness probes, as JSON
	// [{"name":"<container>","livenessProbe":{...}}] (see ContainerLivenessProbe).
	AnnotationContainerProbeContext = "apps.kruise.io/container-probe-context"
	// MaxContainerProbeContextBytes bounds that annotation: every enhanced liveness probe of a
	// pod lands in its node's NodePodProbe, which all tenants on the node share.
	MaxContainerProbeContextBytes = 8 << 10
)

// UsesEnhancedLiveness reports whether the pod o opted in with AnnotationUsingEnhancedLiveness.
func UsesEnhancedLiveness(o metav1.Object) bool {
	return o.GetAnnotations()[AnnotationUsingEnhancedLiveness] == "true"
}

// Event reasons on a pod when a probe result changes; the names OpenKruise uses, so existing
// alerting on them keeps working.
const (
	EventReasonProbeSucceeded = "KruiseProbeSucceeded"
	EventReasonProbeFailed    = "KruiseProbeFailed"
)

// ContainerLivenessProbe is one entry of the AnnotationContainerProbeContext annotation.
type ContainerLivenessProbe struct {
	// Name of the container.
	Name string `json:"name"`
	// LivenessProbe as it was in the container spec.
	LivenessProbe corev1.Probe `json:"livenessProbe"`
}

// ParseContainerProbeContext decodes the value of the AnnotationContainerProbeContext annotation.
func ParseContainerProbeContext(value string) ([]ContainerLivenessProbe, error) {
	var probes []ContainerLivenessProbe
	if err := json.Unmarshal([]byte(value), &probes); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationContainerProbeContext, err)
	}
	return probes, nil
}

// FormatContainerProbeContext encodes probes as the value of the AnnotationContainerProbeContext
// annotation.
func FormatContainerProbeContext(probes []ContainerLivenessProbe) (string, error) {
	if probes == nil {
		probes = []ContainerLivenessProbe{} // "[]", never "null": readers expect a list
	}
	b, err := json.Marshal(probes)
	if err != nil {
		return "", fmt.Errorf("annotation %s: %w", AnnotationContainerProbeContext, err)
	}
	return string(b), nil
}

// ProbeNameSeparator joins a PodProbeMarker's name and its probe's name into the probe name used in
// NodePodProbe, so probes of two markers on one pod never collide.
const ProbeNameSeparator = "#"

// ProbeName is the NodePodProbe probe name of probe in marker.
func ProbeName(marker, probe string) string {
	return marker + ProbeNameSeparator + probe
}

// SplitProbeName reverses ProbeName. ok is false for a name without a separator, e.g. a probe that
// did not come from a PodProbeMarker.
func SplitProbeName(name string) (marker, probe string, ok bool) {
	return strings.Cut(name, ProbeNameSeparator)
}

// livenessProbeSuffix ends the NodePodProbe probe name of an enhanced liveness probe. Such names
// never contain ProbeNameSeparator, so they cannot collide with a PodProbeMarker's probes.
const livenessProbeSuffix = "-livenessProbe"

// LivenessProbeName is the NodePodProbe probe name of container's enhanced liveness probe.
func LivenessProbeName(container string) string { return container + livenessProbeSuffix }

// ParseLivenessProbeName reverses LivenessProbeName; ok is false for any other probe name.
func ParseLivenessProbeName(name string) (container string, ok bool) {
	if strings.Contains(name, ProbeNameSeparator) {
		return "", false
	}
	container, ok = strings.CutSuffix(name, livenessProbeSuffix)
	return container, ok && container != ""
}

// RestartableContainer finds a container of pod by name among those the kubelet probes and
// restarts: a regular container, or a restartable init container (a sidecar). Nil when there is none.
func RestartableContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return c
		}
	}
	return nil
}
