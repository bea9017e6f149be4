// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package kruiseapi holds the parts of OpenKruise's API that probeshim reads but does not serve:
// its PodUnavailableBudget, which the liveness decider honours beside PodDisruptionBudgets when
// OpenKruise's CRD is installed. Only the fields the decider reads are declared; decoding ignores
// the rest, and nothing here is ever written back.
//
// +kubebuilder:object:generate=true
// +groupName=apps.kruise.io
package kruiseapi
