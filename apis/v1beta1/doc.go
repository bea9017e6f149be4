// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package v1beta1 holds apps.kruise.io/v1beta1 ContainerRecreateRequest, the version OpenKruise's
// next release serves: the spec of v1alpha1 unchanged, and a status in which two annotations of
// v1alpha1 became fields (the container status snapshot and the PreRecreateGrace condition).
// probeshim stores requests as v1alpha1 and converts (see conversion.go): its own components read
// and write v1alpha1, so nothing of the node's path waits on the conversion webhook, and clients
// written for OpenKruise's v1beta1 work unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=apps.kruise.io
package v1beta1
