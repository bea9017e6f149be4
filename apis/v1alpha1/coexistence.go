// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

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
