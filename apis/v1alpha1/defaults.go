// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Timing a PodProbeMarker probe gets for each field left empty (zero), written into the stored
// object at admission. They are OpenKruise's: kruise-daemon runs a marker probe with empty fields
// every second, reports the first result, and starts one second after the container; manifests
// written for Kruise (its documentation's examples leave them empty) expect that. The kubelet's
// defaults (period 10 s, failure threshold 3, no initial delay) would make such a marker report
// up to 30 times later.
const (
	MarkerDefaultInitialDelaySeconds = 1
	MarkerDefaultTimeoutSeconds      = 1
	MarkerDefaultPeriodSeconds       = 1
	MarkerDefaultSuccessThreshold    = 1
	MarkerDefaultFailureThreshold    = 1
)

// SetMarkerProbeDefaults fills the empty timing fields of a marker probe with the Marker* values
// and reports whether it changed anything.
func SetMarkerProbeDefaults(p *corev1.Probe) bool {
	changed := false
	set := func(f *int32, v int32) {
		if *f == 0 {
			*f, changed = v, true
		}
	}
	set(&p.InitialDelaySeconds, MarkerDefaultInitialDelaySeconds)
	set(&p.TimeoutSeconds, MarkerDefaultTimeoutSeconds)
	set(&p.PeriodSeconds, MarkerDefaultPeriodSeconds)
	set(&p.SuccessThreshold, MarkerDefaultSuccessThreshold)
	set(&p.FailureThreshold, MarkerDefaultFailureThreshold)
	return changed
}
