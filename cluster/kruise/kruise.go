// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package kruise tells whether OpenKruise runs beside probeshim and which of its parts act on the
// objects probeshim acts on (NodePodProbes and their pods' conditions, ContainerRecreateRequests).
//
// The rule it serves: one kind of work has one actor. While any Kruise part that acts on probes
// is live, probeshim's probe path holds off (no NodePodProbe entries written or adopted, so its
// node services probe nothing and write no NodePodProbe status); while any Kruise part that acts
// on ContainerRecreateRequests is live, probeshim's CRR path holds off (requests are admitted
// marked for Kruise, and neither its node services nor its lifecycle controller touch them).
// Unknown counts as live: Kruise's feature gates are read from kruise-manager's arguments, and
// Kruise's defaults apply where they cannot be read.
package kruise

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Names of Kruise's objects, as its chart installs them.
const (
	MutatingConfigName   = "kruise-mutating-webhook-configuration"
	ValidatingConfigName = "kruise-validating-webhook-configuration"
	// TemplateAnnotation holds the JSON webhook list kruise-manager rebuilds .webhooks from,
	// every minute and on any change.
	TemplateAnnotation = "template"

	DefaultNamespace = "kruise-system"
	ManagerName      = "kruise-controller-manager"
	DaemonName       = "kruise-daemon"
)

// Kruise's webhook entries that act on what probeshim acts on.
const (
	WebhookPPM = "vpodprobemarker.kb.io"           // validating: denies PodProbeMarker writes with its gate off
	WebhookCRR = "mcontainerrecreaterequest.kb.io" // mutating: admits requests kruise-daemon executes
)

// Finalizers Kruise puts on objects probeshim adopts.
const (
	FinalizerPPM        = "kruise.io/node-pod-probe-cleanup"
	FinalizerCRRUnready = "crr.apps.kruise.io/unready-acquired"
)

// Kruise's feature gates that decide which of its parts act (KRUISE.md has the table).
const (
	FeatureGatesArg      = "--feature-gates"
	GateKruiseDaemon     = "KruiseDaemon"
	GatePodProbeMarker   = "PodProbeMarkerGate"
	GateAllAlpha         = "AllAlpha"
	GateEnhancedLiveness = "EnhancedLivenessProbe"
)

// Gates are Kruise's feature gates as kruise-manager was started with them.
type Gates map[string]bool

// gateDefaults are Kruise's defaults for the gates that matter here.
var gateDefaults = Gates{GateKruiseDaemon: true, GatePodProbeMarker: true, GateEnhancedLiveness: false}

// ParseGates reads a --feature-gates value ("A=true,B=false"); malformed pairs are ignored, as
// they would keep kruise-manager from starting.
func ParseGates(s string) Gates {
	g := Gates{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			g[strings.TrimSpace(k)] = b
		}
	}
	return g
}

// Enabled reports a gate as Kruise would: set explicitly, else AllAlpha for alpha gates, else its
// default. KruiseDaemon=false forces PodProbeMarkerGate and EnhancedLivenessProbe off.
func (g Gates) Enabled(name string) bool {
	if (name == GatePodProbeMarker || name == GateEnhancedLiveness) && !g.Enabled(GateKruiseDaemon) {
		return false
	}
	if v, ok := g[name]; ok {
		return v
	}
	if name == GateEnhancedLiveness && g[GateAllAlpha] {
		return true
	}
	return gateDefaults[name]
}

// GatesFromArgs finds the --feature-gates value in a container's arguments ("--feature-gates=X"
// or "--feature-gates X"); ok is false when there is none (all defaults).
func GatesFromArgs(args []string) (Gates, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, FeatureGatesArg+"="); ok {
			return ParseGates(v), true
		}
		if a == FeatureGatesArg && i+1 < len(args) {
			return ParseGates(args[i+1]), true
		}
	}
	return Gates{}, false
}

// TemplateNames lists the webhook names in a configuration's template annotation. A template
// that does not parse yields ok false: the caller cannot tell what kruise-manager will restore.
func TemplateNames(annotations map[string]string) (names []string, ok bool) {
	raw, has := annotations[TemplateAnnotation]
	if !has {
		return nil, true
	}
	var hooks []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(raw), &hooks); err != nil {
		return nil, false
	}
	for _, h := range hooks {
		names = append(names, h.Name)
	}
	return names, true
}

// WithoutTemplateEntry returns the template annotation's value without the named webhook, keeping
// every other entry byte for byte as Kruise wrote it; changed is false when it was not there.
func WithoutTemplateEntry(raw, name string) (out string, changed bool, err error) {
	var hooks []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &hooks); err != nil {
		return "", false, err
	}
	kept := hooks[:0]
	for _, h := range hooks {
		var n struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(h, &n); err != nil {
			return "", false, err
		}
		if n.Name == name {
			changed = true
			continue
		}
		kept = append(kept, h)
	}
	if !changed {
		return raw, false, nil
	}
	b, err := json.Marshal(kept)
	return string(b), true, err
}
