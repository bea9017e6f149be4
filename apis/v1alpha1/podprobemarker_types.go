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

	// Probes run against every selected pod. Names are unique within the marker. At most 32 (see
	// validation.MaxProbesPerMarker): all tenants' probes share one NodePodProbe per node.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Probes []PodContainerProbe `json:"probes" patchStrategy:"merge" patchMergeKey:"name"`
}

// PodContainerProbe is one probe of one container, and what its result does to the pod.
//
// The probe is a corev1.Probe, whose fields take no schema markers here, so the size rules that
// cost O(1) in CEL are stated on this type; the admission webhook and the node service check the
// rest (each argument's and header's size, see package validation).
// +kubebuilder:validation:XValidation:rule="!has(self.probe.exec) || !has(self.probe.exec.command) || size(self.probe.exec.command) <= 64",message="may have at most 64 arguments",fieldPath=".probe.exec.command"
// +kubebuilder:validation:XValidation:rule="!has(self.probe.httpGet) || !has(self.probe.httpGet.path) || size(self.probe.httpGet.path) <= 2048",message="may not be more than 2048 characters",fieldPath=".probe.httpGet.path"
// +kubebuilder:validation:XValidation:rule="!has(self.probe.httpGet) || !has(self.probe.httpGet.httpHeaders) || size(self.probe.httpGet.httpHeaders) <= 16",message="may have at most 16 headers",fieldPath=".probe.httpGet.httpHeaders"
// +kubebuilder:validation:XValidation:rule="!has(self.probe.grpc) || !has(self.probe.grpc.service) || size(self.probe.grpc.service) <= 256",message="may not be more than 256 characters",fieldPath=".probe.grpc.service"
type PodContainerProbe struct {
	// Name identifies the probe within the marker: free text as in OpenKruise (spaces allowed), at
	// most 253 bytes. It must not contain '#', which joins marker and probe names in NodePodProbe.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^#]+$`
	Name string `json:"name"`

	// ContainerName is the container the probe runs in (exec) or is aimed at (network probes).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ContainerName string `json:"containerName"`

	// Probe is a Kubernetes probe: exactly one of exec, httpGet, tcpSocket or grpc, plus timing.
	Probe ContainerProbeSpec `json:"probe"`

	// MarkerPolicy patches labels and annotations onto the pod for each probe state, at most one
	// entry per state. Without markerPolicy and podConditionType the result is recorded only in
	// NodePodProbe status (as in OpenKruise; admission warns).
	// +listType=map
	// +listMapKey=state
	// +kubebuilder:validation:MaxItems=2
	// +optional
	MarkerPolicy []ProbeMarkerPolicy `json:"markerPolicy,omitempty" patchStrategy:"merge" patchMergeKey:"state"`

	// PodConditionType, when set, names a pod condition that mirrors the probe: True on Succeeded,
	// False on Failed. It must be a qualified name and not a condition the kubelet owns.
	// +kubebuilder:validation:MaxLength=317
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

	// Labels to set on the pod, at most 16.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations to set on the pod, at most 16, each value at most 4096 bytes.
	// +kubebuilder:validation:MaxProperties=16
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

	// Conditions say what stops the marker from working as written. Type NodeBudget is False while
	// some nodes leave the marker's probes out because its namespace uses more than its share of
	// the node's probe budget; its message names them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons of PodProbeMarker status.
const (
	// PodProbeMarkerNodeBudget is True when every selected pod's node has room for the marker's
	// probes, False when some nodes left them out (reason NodeBudgetExceeded).
	PodProbeMarkerNodeBudget = "NodeBudget"
	ReasonNodeBudgetExceeded = "NodeBudgetExceeded"
	ReasonWithinNodeBudget   = "WithinNodeBudget"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ppm
// No column lists probe names: a printer column shows only the first match of a [*] path.
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedPods`,description="Pods the selector matches."
// The rollout columns read annotations (see rollout.go): beside Kruise, its CRD prunes unknown
// status fields, so the counts are not status fields.
// +kubebuilder:printcolumn:name="Dry-Run",type=string,JSONPath=`.metadata.annotations.probeshim\.io/dry-run`,description="\"true\" while the marker writes nothing on pods."
// +kubebuilder:printcolumn:name="Results",type=string,JSONPath=`.metadata.annotations.probeshim\.io/results-summary`,description="Pods per probe state, summed over the probes."
// +kubebuilder:printcolumn:name="Unprobed",type=string,JSONPath=`.metadata.annotations.probeshim\.io/unprobed`,description="Matched pods no node service probes (reasons in probeshim.io/unprobed-reasons)."
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
