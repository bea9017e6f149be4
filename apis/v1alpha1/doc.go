// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package v1alpha1 holds the apps.kruise.io/v1alpha1 API types probeshim serves: PodProbeMarker,
// NodePodProbe and ContainerRecreateRequest. Field names and JSON tags match OpenKruise exactly, so
// manifests and clients written for OpenKruise work unchanged; rules the schema cannot express live in
// the validation subpackage, which both the admission webhook and the node service call.
//
// +kubebuilder:object:generate=true
// +groupName=apps.kruise.io
package v1alpha1
