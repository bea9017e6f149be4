// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruiseapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// GroupVersion is OpenKruise's apps.kruise.io/v1alpha1, where its PodUnavailableBudget is served.
var GroupVersion = schema.GroupVersion{Group: "apps.kruise.io", Version: "v1alpha1"}

// PodUnavailableBudgetKind is the kind the decider looks for in discovery.
const PodUnavailableBudgetKind = "PodUnavailableBudget"

// AddToScheme registers PodUnavailableBudget and its list with s. It does not touch the other
// kinds of the group (probeshim's own apis/v1alpha1 registers those).
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PodUnavailableBudget{}, &PodUnavailableBudgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// +kubebuilder:object:root=true

// PodUnavailableBudget is OpenKruise's budget of pods that may be unavailable at once, guarded by
// its own webhook against deletions, evictions and in-place updates.
type PodUnavailableBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodUnavailableBudgetSpec   `json:"spec,omitempty"`
	Status PodUnavailableBudgetStatus `json:"status,omitempty"`
}

// PodUnavailableBudgetSpec selects pods by label or by their workload.
type PodUnavailableBudgetSpec struct {
	Selector        *metav1.LabelSelector `json:"selector,omitempty"`
	TargetReference *TargetReference      `json:"targetRef,omitempty"`
	MaxUnavailable  *intstr.IntOrString   `json:"maxUnavailable,omitempty"`
	MinAvailable    *intstr.IntOrString   `json:"minAvailable,omitempty"`
}

// TargetReference names the workload whose pods a budget covers.
type TargetReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// PodUnavailableBudgetStatus is what OpenKruise's controller counted.
type PodUnavailableBudgetStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// DisruptedPods and UnavailablePods map pod names to when Kruise let them go: counted as
	// unavailable until Kruise sees them so.
	DisruptedPods      map[string]metav1.Time `json:"disruptedPods,omitempty"`
	UnavailablePods    map[string]metav1.Time `json:"unavailablePods,omitempty"`
	UnavailableAllowed int32                  `json:"unavailableAllowed"`
	CurrentAvailable   int32                  `json:"currentAvailable"`
	DesiredAvailable   int32                  `json:"desiredAvailable"`
	TotalReplicas      int32                  `json:"totalReplicas"`
}

// +kubebuilder:object:root=true

// PodUnavailableBudgetList is a list of PodUnavailableBudgets.
type PodUnavailableBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodUnavailableBudget `json:"items"`
}
