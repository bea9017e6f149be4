// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels on a ContainerRecreateRequest. The node service watches only active requests for its
// own node, so these two keys are what keep its watch small.
const (
	// LabelCRRPodUID is the UID of the target pod; set at creation and immutable.
	LabelCRRPodUID = "crr.apps.kruise.io/pod-uid"
	// LabelCRRNodeName is the node of the target pod; set at creation and immutable.
	LabelCRRNodeName = "crr.apps.kruise.io/node-name"
	// LabelCRRActive is present while the request is not completed and removed when it completes.
	LabelCRRActive = "crr.apps.kruise.io/active"
	// AnnotationCRRUnreadyAcquired on a request is when the cluster made its pod not ready for
	// strategy.unreadyGracePeriodSeconds (RFC 3339); the node waits the grace from it before it stops
	// anything.
	AnnotationCRRUnreadyAcquired = "crr.apps.kruise.io/unready-acquired"
	// AnnotationCRRSyncContainerStatuses is OpenKruise's snapshot of the target containers'
	// statuses (a JSON list of name, ready, restartCount, containerID), written by kruise-manager;
	// v1beta1 holds it as status.containerStatusSnapshot. probeshim neither writes nor reads it: it
	// only carries it across the conversion.
	AnnotationCRRSyncContainerStatuses = "crr.apps.kruise.io/sync-container-statuses"
)

// AnnotationCRRReason on a request says why its containers are restarted, in the words of the
// kubelet's Killing event ("failed liveness probe, will be restarted; decider: ..."): the node
// service tells it in that event. The liveness decider sets it; at most MaxCRRReasonBytes.
const AnnotationCRRReason = "probeshim.io/reason"

// MaxCRRReasonBytes bounds the reason the node service repeats in an event.
const MaxCRRReasonBytes = 512

// AnnotationCRRConcurrency on a pod says whether it may have more than one active
// ContainerRecreateRequest at a time: CRRConcurrencyForbid makes admission refuse a new request
// while another one of the pod is active; anything else (or no annotation) allows it, as
// OpenKruise does (the node processes a pod's requests one after another).
const (
	AnnotationCRRConcurrency = "probeshim.io/crr-concurrency"
	CRRConcurrencyForbid     = "Forbid"
)

// ContainerRecreateRequestSpec says which containers of which pod to restart, and how.
type ContainerRecreateRequestSpec struct {
	// PodName is the pod, in the request's namespace, whose containers are recreated.
	// +kubebuilder:validation:MinLength=1
	PodName string `json:"podName"`

	// Containers to recreate, unique by name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	Containers []ContainerRecreateRequestContainer `json:"containers" patchStrategy:"merge" patchMergeKey:"name"`

	// Strategy tunes how the containers are stopped.
	// +optional
	Strategy *ContainerRecreateRequestStrategy `json:"strategy,omitempty"`

	// ActiveDeadlineSeconds bounds the whole request; once it passes, the request completes and no
	// further container is killed.
	// +kubebuilder:validation:Minimum=3
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// TTLSecondsAfterFinished deletes the request this long after it completed.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ContainerRecreateRequestContainer is one container to recreate.
type ContainerRecreateRequestContainer struct {
	// Name of a container in the pod's spec.containers.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// PreStop is copied from the container's lifecycle.preStop when the request is admitted, so the
	// node service can run it without reading the pod.
	// +optional
	PreStop *ProbeHandler `json:"preStop,omitempty"`

	// Ports is copied from the container when the request is admitted; a preStop httpGet or
	// tcpSocket may name one of them.
	// +optional
	Ports []corev1.ContainerPort `json:"ports,omitempty"`

	// StatusContext identifies the container instance to kill, so a container that already restarted
	// is not killed a second time.
	// +optional
	StatusContext *ContainerRecreateRequestContainerContext `json:"statusContext,omitempty"`
}

// ProbeHandler is the subset of a lifecycle handler the node service can run as a preStop hook.
// At most one field is set.
type ProbeHandler struct {
	// Exec runs a command in the container.
	// +optional
	Exec *corev1.ExecAction `json:"exec,omitempty"`
	// HTTPGet sends a GET request to the pod.
	// +optional
	HTTPGet *corev1.HTTPGetAction `json:"httpGet,omitempty"`
	// TCPSocket opens a TCP connection to the pod.
	// +optional
	TCPSocket *corev1.TCPSocketAction `json:"tcpSocket,omitempty"`
}

// ContainerRecreateRequestContainerContext identifies a container instance.
type ContainerRecreateRequestContainerContext struct {
	// ContainerID as in the pod status, "<runtime>://<id>".
	ContainerID string `json:"containerID"`
	// RestartCount as in the pod status when the request was admitted.
	// +kubebuilder:validation:Minimum=0
	RestartCount int32 `json:"restartCount"`
}

// ContainerRecreateRequestStrategy tunes the recreation.
type ContainerRecreateRequestStrategy struct {
	// FailurePolicy decides whether the remaining containers are still recreated after one fails.
	// Defaults to Fail.
	// +kubebuilder:validation:Enum=Fail;Ignore
	// +optional
	FailurePolicy ContainerRecreateRequestFailurePolicyType `json:"failurePolicy,omitempty"`

	// OrderedRecreate recreates the next container only after the previous one is running again.
	// +optional
	OrderedRecreate bool `json:"orderedRecreate,omitempty"`

	// ForceRecreate kills the container even if it is still starting.
	// +optional
	ForceRecreate bool `json:"forceRecreate,omitempty"`

	// TerminationGracePeriodSeconds overrides the pod's grace period for the stop. The node service
	// never grants less than 2 seconds, so zero means "as short as allowed".
	// +kubebuilder:validation:Minimum=0
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// UnreadyGracePeriodSeconds keeps the pod not-ready this long before preStop and stop, so
	// endpoints drain first.
	// +kubebuilder:validation:Minimum=0
	// +optional
	UnreadyGracePeriodSeconds *int64 `json:"unreadyGracePeriodSeconds,omitempty"`

	// MinStartedSeconds is how long a recreated container must run before it counts as Succeeded.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinStartedSeconds int32 `json:"minStartedSeconds,omitempty"`
}

// ContainerRecreateRequestFailurePolicyType is the value of strategy.failurePolicy.
type ContainerRecreateRequestFailurePolicyType string

const (
	ContainerRecreateRequestFailurePolicyFail   ContainerRecreateRequestFailurePolicyType = "Fail"
	ContainerRecreateRequestFailurePolicyIgnore ContainerRecreateRequestFailurePolicyType = "Ignore"
)

// ContainerRecreateRequestStatus is written by the cluster controller and the node service.
type ContainerRecreateRequestStatus struct {
	// Phase of the request: Pending, Recreating or Completed.
	// +kubebuilder:validation:Enum=Pending;Recreating;Completed
	Phase ContainerRecreateRequestPhase `json:"phase"`

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
	ContainerRecreateStates []ContainerRecreateRequestContainerRecreateState `json:"containerRecreateStates,omitempty"`
}

// ContainerRecreateRequestPhase is the phase of a request (Pending, Recreating, Completed) or of one
// container in it (Pending, Recreating, Succeeded, Failed).
type ContainerRecreateRequestPhase string

const (
	ContainerRecreateRequestPending    ContainerRecreateRequestPhase = "Pending"
	ContainerRecreateRequestRecreating ContainerRecreateRequestPhase = "Recreating"
	ContainerRecreateRequestSucceeded  ContainerRecreateRequestPhase = "Succeeded"
	ContainerRecreateRequestFailed     ContainerRecreateRequestPhase = "Failed"
	ContainerRecreateRequestCompleted  ContainerRecreateRequestPhase = "Completed"
)

// ContainerRecreateRequestContainerRecreateState is the progress of one container.
type ContainerRecreateRequestContainerRecreateState struct {
	// Name of the container.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// Phase of this container: Pending, Recreating, Succeeded or Failed.
	// +kubebuilder:validation:Enum=Pending;Recreating;Succeeded;Failed
	Phase ContainerRecreateRequestPhase `json:"phase"`

	// Message explains the phase.
	// +optional
	Message string `json:"message,omitempty"`

	// IsKilled records that the node service has stopped the container, so a retry after a service
	// restart does not stop it again.
	// +optional
	IsKilled bool `json:"isKilled,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced,shortName=crr
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,description="Phase of the request."
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.podName`,description="Pod whose containers are recreated."
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.metadata.labels.crr\.apps\.kruise\.io/node-name`,description="Node of the pod."
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1,description="Why the request is in its phase."

// ContainerRecreateRequest asks the node service to restart containers of a pod in place, without
// deleting the pod.
type ContainerRecreateRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ContainerRecreateRequestSpec   `json:"spec,omitempty"`
	Status ContainerRecreateRequestStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ContainerRecreateRequestList is a list of ContainerRecreateRequest.
type ContainerRecreateRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ContainerRecreateRequest `json:"items"`
}

// Hub marks v1alpha1, the stored version, as the one every other version converts to and from
// (apis/v1beta1's conversion.go).
func (*ContainerRecreateRequest) Hub() {}

func init() {
	SchemeBuilder.Register(&ContainerRecreateRequest{}, &ContainerRecreateRequestList{})
}
