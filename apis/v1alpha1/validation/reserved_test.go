// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"testing"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func TestReservedMetadataKey(t *testing.T) {
	for key, want := range map[string]bool{
		"apps.kruise.io/using-enhanced-liveness":     true,
		"apps.kruise.io/container-probe-context":     true,
		"x.kruise.io/anything":                       true,
		"kruise.io/anything":                         true,
		"probeshim.io/marker-keys":                   true,
		"probeshim.io/liveness-restarts":             true,
		"a.probeshim.io/x":                           true,
		"kubernetes.io/config.mirror":                true,
		"foo.kubernetes.io/bar":                      true,
		"node-role.kubernetes.io/control-plane":      true,
		"k8s.io/x":                                   true,
		"sub.k8s.io/x":                               true,
		"APPS.Kruise.IO/container-probe-context":     true, // annotation keys compare case-insensitively
		"controller.kubernetes.io/pod-deletion-cost": false,
		"Controller.Kubernetes.io/Pod-Deletion-Cost": false,
		"gameserver-idle":                            false,
		"example.com/idle":                           false,
		"notkruise.io/x":                             false, // not a subdomain
		"kruise.io.example.com/x":                    false,
		"mykubernetes.io/x":                          false,
	} {
		if got := ReservedMetadataKey(key); got != want {
			t.Errorf("ReservedMetadataKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestReservedCondition(t *testing.T) {
	for c, want := range map[string]bool{
		"Ready": true, "ContainersReady": true, "Initialized": true, "PodScheduled": true,
		"PodReadyToStartContainers": true, "DisruptionTarget": true, "PodResizePending": true,
		"PodResizeInProgress": true, "KruisePodReady": true, "InPlaceUpdateReady": true,
		"apps.kruise.io/anything": true, "probeshim.io/x": true, "x.kubernetes.io/y": true,
		"game.kruise.io/idle": false, "game.kruise.io/healthy": false, // kruise-game's service qualities
		"example.com/ready": false, "Idle": false, "ready": false,
	} {
		if got := ReservedCondition(c); got != want {
			t.Errorf("ReservedCondition(%q) = %v, want %v", c, got, want)
		}
	}
}

func TestValidatePodProbeMarkerReserved(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.PodProbeMarker)
		want   []wantErr
	}{
		{name: "OpenKruise's example stays valid", mutate: func(*v1alpha1.PodProbeMarker) {}},
		{name: "the enhanced liveness opt-in", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations["apps.kruise.io/using-enhanced-liveness"] = "true"
		}, want: []wantErr{invalid("spec.probes[0].markerPolicy[0].annotations[apps.kruise.io/using-enhanced-liveness]", "must not use a reserved prefix")}},
		{name: "the liveness context", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[1].Annotations["apps.kruise.io/container-probe-context"] = `[{"name":"c","livenessProbe":{"exec":{"command":["sh"]}}}]`
		}, want: []wantErr{invalid("spec.probes[0].markerPolicy[1].annotations[apps.kruise.io/container-probe-context]", "use your own, e.g. example.com/container-probe-context")}},
		{name: "probeshim's own bookkeeping", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations["probeshim.io/liveness-restarts"] = "{}"
		}, want: []wantErr{invalid("spec.probes[0].markerPolicy[0].annotations[probeshim.io/liveness-restarts]", "must not use a reserved prefix")}},
		{name: "a Kubernetes label on a subdomain", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Labels["node-role.kubernetes.io/x"] = "y"
		}, want: []wantErr{invalid("spec.probes[0].markerPolicy[0].labels[node-role.kubernetes.io/x]", "must not use a reserved prefix")}},
		{name: "the Ready condition", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].PodConditionType = "Ready"
		}, want: []wantErr{invalid("spec.probes[0].podConditionType", "must not name a condition another controller owns")}},
		{name: "OpenKruise's readiness gate", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].PodConditionType = "KruisePodReady"
		}, want: []wantErr{invalid("spec.probes[0].podConditionType", "use your own, e.g. example.com/kruisepodready")}},
		{name: "an own condition", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].PodConditionType = "example.com/idle"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := marker()
			tc.mutate(m)
			checkErrs(t, ValidatePodProbeMarker(m), tc.want...)
		})
	}
}

// A marker stored before the rule keeps taking updates that add no reserved key.
func TestValidatePodProbeMarkerUpdateGrandfathersReserved(t *testing.T) {
	legacy := marker()
	legacy.Spec.Probes[0].PodConditionType = "KruisePodReady"
	legacy.Spec.Probes[0].MarkerPolicy[0].Annotations["apps.kruise.io/x"] = "y"

	relabelled := legacy.DeepCopy()
	relabelled.Labels = map[string]string{"team": "games"}
	relabelled.Spec.Probes[0].Probe.PeriodSeconds = 30
	checkErrs(t, ValidatePodProbeMarkerUpdate(relabelled, legacy))

	added := legacy.DeepCopy()
	added.Spec.Probes[0].MarkerPolicy[1].Annotations["apps.kruise.io/x"] = "z" // the other state
	added.Spec.Probes[0].MarkerPolicy[0].Labels["probeshim.io/y"] = "z"
	checkErrs(t, ValidatePodProbeMarkerUpdate(added, legacy),
		invalid("spec.probes[0].markerPolicy[0].labels[probeshim.io/y]", "must not use a reserved prefix"),
		invalid("spec.probes[0].markerPolicy[1].annotations[apps.kruise.io/x]", "must not use a reserved prefix"))

	renamed := legacy.DeepCopy()
	renamed.Spec.Probes[0].Name = "Other"
	checkErrs(t, ValidatePodProbeMarkerUpdate(renamed, legacy),
		invalid("spec.probes[0].podConditionType", "must not name a condition another controller owns"),
		invalid("spec.probes[0].markerPolicy[0].annotations[apps.kruise.io/x]", "must not use a reserved prefix"))
}
