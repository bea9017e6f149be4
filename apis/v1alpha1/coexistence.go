// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Beside OpenKruise (cluster/kruise): which of the two carries out a ContainerRecreateRequest.
const (
	// LabelCRRExecutor, set to CRRExecutorKruise by probeshim's admission while OpenKruise's
	// ContainerRecreateRequest path is live, hands the request to kruise-daemon: probeshim's
	// node services do not select it and its lifecycle controller leaves it alone. The handover
	// tool removes it from the requests it adopts.
	LabelCRRExecutor = "probeshim.io/crr-executor"
	// CRRExecutorKruise is LabelCRRExecutor's only value.
	CRRExecutorKruise = "kruise"
)

// The KruisePodReady readiness gate: a ContainerRecreateRequest with
// strategy.unreadyGracePeriodSeconds makes its pod not ready through it, and only a pod that
// carries it can be made not ready that way.
const (
	// PodConditionKruisePodReady is OpenKruise's readiness gate and pod condition. The condition's
	// message lists who holds the pod not ready; it is False while the list is not empty.
	PodConditionKruisePodReady corev1.PodConditionType = "KruisePodReady"
	// LabelKruisePodReadinessGate set to "true" on a pod, or on its namespace, asks admission to
	// add the KruisePodReady readiness gate to the pod when it is created: the opt-in of pods not
	// created by OpenKruise's workloads (into whose pods OpenKruise adds it itself), like
	// OpenKruise's feature gate KruisePodReadinessGate but per pod or namespace.
	LabelKruisePodReadinessGate = "probeshim.io/kruise-pod-readiness-gate"
)
