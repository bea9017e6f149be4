// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// ConditionPreRecreateGrace is the condition whose lastTransitionTime is when the cluster made the
// pod not ready for strategy.unreadyGracePeriodSeconds (v1alpha1's annotation
// crr.apps.kruise.io/unready-acquired); the node waits the grace from it before it stops anything.
const ConditionPreRecreateGrace = "PreRecreateGrace"

// ContainerRecreateRequestStatus is written by the cluster controller and the node service.
type ContainerRecreateRequestStatus struct {
	// Phase of the request: Pending, Recreating or Completed.
	// +kubebuilder:validation:Enum=Pending;Recreating;Completed
	Phase v1alpha1.ContainerRecreateRequestPhase `json:"phase"`

	// CompletionTime is when the request completed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Message explains the phase, e.g. why the request completed early.
	// +optional
	Message string `json:"message,omitempty"`

	// ContainerRecreateStates holds one entry per container of the spec.
	// +listType=map
	// +listMapKey=name
	// +optional
	ContainerRecreateStates []v1alpha1.ContainerRecreateRequestContainerRecreateState `json:"containerRecreateStates,omitempty"`

	// ContainerStatusSnapshot is the target containers' statuses as the controller last saw them
	// (v1alpha1's annotation crr.apps.kruise.io/sync-container-statuses).
	// +listType=map
	// +listMapKey=name
	// +optional
	ContainerStatusSnapshot []ContainerRecreateRequestSyncContainerStatus `json:"containerStatusSnapshot,omitempty"`

	// Conditions of the request; PreRecreateGrace is the one in use.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ContainerRecreateRequestSyncContainerStatus is one container's status in the snapshot.
type ContainerRecreateRequestSyncContainerStatus struct {
	// Name of the container.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Ready as in the pod status.
	Ready bool `json:"ready"`
	// RestartCount as in the pod status.
	// +kubebuilder:validation:Minimum=0
	RestartCount int32 `json:"restartCount"`
	// ContainerID as in the pod status, "<runtime>://<id>".
	// +optional
	ContainerID string `json:"containerID,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=crr
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Phase of the request."
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.podName`,description="Pod whose containers are recreated."
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.metadata.labels.crr\.apps\.kruise\.io/node-name`,description="Node of the pod."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1,description="Why the request is in its phase."

// ContainerRecreateRequest asks the node service to restart containers of a pod in place, without
// deleting the pod. Its spec is v1alpha1's, field for field.
type ContainerRecreateRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   v1alpha1.ContainerRecreateRequestSpec `json:"spec,omitempty"`
	Status ContainerRecreateRequestStatus        `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ContainerRecreateRequestList is a list of ContainerRecreateRequest.
type ContainerRecreateRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ContainerRecreateRequest `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ContainerRecreateRequest{}, &ContainerRecreateRequestList{})
}
