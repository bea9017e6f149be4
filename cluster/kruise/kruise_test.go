// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kruise

import (
	"strings"
	"testing"
)

func TestGates(t *testing.T) {
	for _, tc := range []struct {
		args                  []string
		daemon, probes, alive bool
	}{
		{nil, true, true, false}, // Kruise's defaults
		{[]string{"--feature-gates=PodProbeMarkerGate=false"}, true, false, false},
		{[]string{"--feature-gates", "KruiseDaemon=false,PodProbeMarkerGate=true,EnhancedLivenessProbe=true"}, false, false, false}, // KruiseDaemon=false forces both off
		{[]string{"--feature-gates=AllAlpha=true"}, true, true, true},
		{[]string{"--feature-gates=PodProbeMarkerGate=maybe"}, true, true, false}, // malformed: ignored
	} {
		g, _ := GatesFromArgs(tc.args)
		if g.Enabled(GateKruiseDaemon) != tc.daemon || g.Enabled(GatePodProbeMarker) != tc.probes || g.Enabled(GateEnhancedLiveness) != tc.alive {
			t.Errorf("%q: KruiseDaemon=%v PodProbeMarkerGate=%v EnhancedLivenessProbe=%v", tc.args,
				g.Enabled(GateKruiseDaemon), g.Enabled(GatePodProbeMarker), g.Enabled(GateEnhancedLiveness))
		}
	}
}

func gates(daemon, probes bool) map[string]bool {
	return map[string]bool{GateKruiseDaemon: daemon, GatePodProbeMarker: daemon && probes}
}

func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		name          string
		obs           Observation
		probes, crr   bool
		conflictsWith string
	}{
		{"no Kruise", Observation{Gates: gates(true, true)}, false, false, ""},
		{"Kruise with defaults", Observation{Installed: true, Manager: true, Daemon: true, Gates: gates(true, true),
			Webhooks: []string{WebhookCRR, "mpod.kb.io", WebhookPPM}}, true, true, "kruise-daemon prober"},
		// The daemon's CRR loop runs without PodProbeMarkerGate.
		{"probes gate off, entries removed", Observation{Installed: true, Manager: true, Daemon: true, Gates: gates(true, false),
			Webhooks: []string{"mpod.kb.io"}}, false, true, "kruise-daemon ContainerRecreateRequest executor"},
		// With the gate off the entry still denies every PodProbeMarker write.
		{"probes gate off, entry live", Observation{Installed: true, Manager: true, Gates: gates(true, false),
			Webhooks: []string{WebhookPPM}}, true, true, "webhook vpodprobemarker.kb.io"},
		{"entry live but handed over (the keeper's)", Observation{Installed: true, Manager: true, Gates: gates(false, false),
			Webhooks: []string{WebhookPPM}, HandedOver: []Work{WorkProbes}}, false, false, ""},
		{"nothing readable: assumed live", Observation{Gates: gates(true, true), Unreadable: []string{"forbidden"}}, true, true, "kruise-manager PodProbeMarker and NodePodProbe controllers"},
		{"CRR stored as v1beta1", Observation{Installed: true, Gates: gates(false, false), CRRStorage: "v1beta1"}, false, true, "ContainerRecreateRequest CRD storing v1beta1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.obs.Holds(WorkProbes) != ""; got != tc.probes {
				t.Errorf("probes held = %v, want %v (%v)", got, tc.probes, tc.obs.Conflicts())
			}
			if got := tc.obs.Holds(WorkCRR) != ""; got != tc.crr {
				t.Errorf("crr held = %v, want %v (%v)", got, tc.crr, tc.obs.Conflicts())
			}
			found := tc.conflictsWith == ""
			for _, c := range tc.obs.Conflicts() {
				found = found || c.Kruise == tc.conflictsWith
			}
			if !found {
				t.Errorf("no conflict %q in %v", tc.conflictsWith, tc.obs.Conflicts())
			}
		})
	}
}

// A cluster that stores ContainerRecreateRequests as v1beta1 is refused --crr, with what to do.
func TestHandoverRefusesCRRv1beta1(t *testing.T) {
	obs := Observation{Installed: true, Manager: true, Gates: gates(false, false), CRRStorage: "v1beta1"}
	err := preflight(obs, HandoverOptions{CRR: true, KruiseNamespace: DefaultNamespace})
	if err == nil || !strings.Contains(err.Error(), "stores ContainerRecreateRequests as v1beta1") || !strings.Contains(err.Error(), "--probes only") {
		t.Errorf("got %v", err)
	}
	if err := preflight(obs, HandoverOptions{Probes: true}); err != nil {
		t.Errorf("--probes: %v", err)
	}
	if err := preflight(Observation{Unreadable: []string{"x"}}, HandoverOptions{Probes: true}); err == nil || !strings.Contains(err.Error(), "cannot see") {
		t.Errorf("unreadable: %v", err)
	}
}

func TestTemplateEntry(t *testing.T) {
	raw := `[{"name":"mpod.kb.io","x":1},{"name":"mcontainerrecreaterequest.kb.io","y":[2]}]`
	out, changed, err := WithoutTemplateEntry(raw, WebhookCRR)
	if err != nil || !changed || out != `[{"name":"mpod.kb.io","x":1}]` {
		t.Errorf("got %s %v %v", out, changed, err)
	}
	if _, changed, _ := WithoutTemplateEntry(out, WebhookCRR); changed {
		t.Error("removed twice")
	}
	if _, ok := TemplateNames(map[string]string{TemplateAnnotation: "{"}); ok {
		t.Error("a broken template parsed")
	}
}
