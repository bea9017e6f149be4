// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePodProbeSpec is the probe work of one node: every probe of every pod on it.
type NodePodProbeSpec struct {
	// PodProbes holds one entry per pod, keyed by pod UID so that a recreated pod with the same name
	// never inherits the old pod's results.
	// +listType=map
	// +listMapKey=uid
	// +optional
	PodProbes []PodProbe `json:"podProbes,omitempty"`
}

// PodProbe is the probes of one pod.
type PodProbe struct {
	// Name of the pod.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Namespace of the pod.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`

	// UID of the pod.
	// +kubebuilder:validation:MinLength=1
	UID string `json:"uid"`

	// IP of the pod, where its network probes go (a probe whose host names loopback goes to the
	// pod's own loopback instead, inside its network namespace). The node service refuses the
	// network probes of an entry without an IP, or whose IP is not the pod's own as the container
	// runtime reports it. A probe's Host header may name it.
	IP string `json:"IP"`

	// Probes of the pod, unique by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Probes []ContainerProbe `json:"probes,omitempty"`
}

// ContainerProbe is one probe the node service runs.
type ContainerProbe struct {
	// Name is unique within the pod. Probes of a PodProbeMarker are named "<marker>#<probe>" (see
	// ProbeName), which is why marker probe names must not contain '#'.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// ContainerName is the container the probe belongs to.
	// +kubebuilder:validation:MinLength=1
	ContainerName string `json:"containerName"`

	// Probe is the Kubernetes probe to run.
	Probe ContainerProbeSpec `json:"probe"`

	// ExecFree makes the node service run the probe, an exec probe of exactly `cat <absolute path>`
	// (see ExecFreePath), by reading the file inside the container's root as the container's user,
	// without starting a process. Set from a PodProbeMarker's AnnotationExecFree. Under a CRD schema
	// that lacks the field (Kruise's) it is pruned and the probe runs as the exec it is.
	// +optional
	ExecFree bool `json:"execFree,omitempty"`
}

// NodePodProbeStatus is written by the node service.
type NodePodProbeStatus struct {
	// PodProbeStatuses holds one entry per pod, keyed by pod UID.
	// +listType=map
	// +listMapKey=uid
	// +optional
	PodProbeStatuses []PodProbeStatus `json:"podProbeStatuses,omitempty"`
}

// PodProbeStatus is the results of one pod's probes.
type PodProbeStatus struct {
	// Name of the pod.
	Name string `json:"name"`

	// Namespace of the pod.
	Namespace string `json:"namespace"`

	// UID of the pod.
	// +kubebuilder:validation:MinLength=1
	UID string `json:"uid"`

	// ProbeStates holds one entry per probe, keyed by the probe name of the spec.
	// +listType=map
	// +listMapKey=name
	// +optional
	ProbeStates []ContainerProbeState `json:"probeStates,omitempty"`
}

// ContainerProbeState is the last published result of one probe.
type ContainerProbeState struct {
	// Name of the probe, as in the spec.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// State is the result after thresholds. Unknown while a (re)started container has no result yet.
	// +kubebuilder:validation:Enum=Succeeded;Failed;Unknown
	State ProbeState `json:"state"`

	// LastProbeTime is when the probe last ran.
	// +optional
	LastProbeTime metav1.Time `json:"lastProbeTime,omitempty"`

	// LastTransitionTime is when State last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// Message is the probe's output or error, capped in length.
	// +optional
	Message string `json:"message,omitempty"`
}

// ProbeState is the result of a probe.
type ProbeState string

const (
	ProbeSucceeded ProbeState = "Succeeded"
	ProbeFailed    ProbeState = "Failed"
	// ProbeUnknown means there is no current result, e.g. right after a container restart; it must
	// never be reported as Failed.
	ProbeUnknown ProbeState = "Unknown"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=npp
// +kubebuilder:printcolumn:name="Node-Service",type=string,JSONPath=`.metadata.annotations.probeshim\.io/node-service`,description="Heartbeat of the node service (Live, Silent, NoLease), recorded by the cluster deployment when it changes; the live renewTime is in the Lease probeshim-node-lease/<node>."
// +kubebuilder:printcolumn:name="Since",type=date,JSONPath=`.metadata.annotations.probeshim\.io/node-service-since`,description="When the node service's heartbeat state began; for Silent, its last heartbeat."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// NodePodProbe is the probe work of one node; its name is the node's name. The cluster controller
// writes the spec, the node service writes the status.
type NodePodProbe struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodePodProbeSpec   `json:"spec,omitempty"`
	Status NodePodProbeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NodePodProbeList is a list of NodePodProbe.
type NodePodProbeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePodProbe `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodePodProbe{}, &NodePodProbeList{})
}
