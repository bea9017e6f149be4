// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodProbeMarkerSpec says which pods to probe, how, and what to record on each pod.
type PodProbeMarkerSpec struct {
	// Selector picks the pods in the marker's namespace that run the probes. It must not be empty and
	// cannot change after creation: the pods a marker has labelled must stay the pods it cleans up.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="must not be empty: an empty selector matches every pod in the namespace"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="field is immutable: delete the PodProbeMarker and create a new one to probe other pods"
	Selector *metav1.LabelSelector `json:"selector"`

	// Probes run against every selected pod. Names are unique within the marker.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	Probes []PodContainerProbe `json:"probes" patchStrategy:"merge" patchMergeKey:"name"`
}

// PodContainerProbe is one probe of one container, and what its result does to the pod.
type PodContainerProbe struct {
	// Name identifies the probe within the marker. It must not contain '#', which joins marker and
	// probe names in NodePodProbe.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^#]+$`
	Name string `json:"name"`

	// ContainerName is the container the probe runs in (exec) or is aimed at (network probes).
	// +kubebuilder:validation:MinLength=1
	ContainerName string `json:"containerName"`

	// Probe is a Kubernetes probe: exactly one of exec, httpGet, tcpSocket or grpc, plus timing.
	Probe ContainerProbeSpec `json:"probe"`

	// MarkerPolicy patches labels and annotations onto the pod for each probe state, at most one
	// entry per state. At least one of markerPolicy and podConditionType must be set.
	// +listType=map
	// +listMapKey=state
	// +optional
	MarkerPolicy []ProbeMarkerPolicy `json:"markerPolicy,omitempty" patchStrategy:"merge" patchMergeKey:"state"`

	// PodConditionType, when set, names a pod condition that mirrors the probe: True on Succeeded,
	// False on Failed. It must be a qualified name and not a condition the kubelet owns.
	// +optional
	PodConditionType string `json:"podConditionType,omitempty"`
}

// ContainerProbeSpec wraps corev1.Probe so that the JSON is the probe itself (inline), exactly as
// a container's livenessProbe is written.
type ContainerProbeSpec struct {
	corev1.Probe `json:",inline"`
}

// ProbeMarkerPolicy is what to put on the pod while the probe is in State.
type ProbeMarkerPolicy struct {
	// State the probe must be in for these labels and annotations to apply.
	// +kubebuilder:validation:Enum=Succeeded;Failed
	State ProbeState `json:"state"`

	// Labels to set on the pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations to set on the pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodProbeMarkerStatus is what the cluster controller last observed.
type PodProbeMarkerStatus struct {
	// ObservedGeneration is the metadata.generation the status reflects.
	ObservedGeneration int64 `json:"observedGeneration"`

	// MatchedPods counts the pods the selector matches.
	// +optional
	MatchedPods int64 `json:"matchedPods,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ppm
// No column lists probe names: a printer column shows only the first match of a [*] path.
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedPods`,description="Pods the selector matches."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.spec.selector`,priority=1,description="Label selector of the probed pods."

// PodProbeMarker runs custom probes in the selected pods and records the results on them as
// conditions, labels and annotations.
type PodProbeMarker struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   PodProbeMarkerSpec   `json:"spec,omitempty"`
	Status PodProbeMarkerStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PodProbeMarkerList is a list of PodProbeMarker.
type PodProbeMarkerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodProbeMarker `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PodProbeMarker{}, &PodProbeMarkerList{})
}
