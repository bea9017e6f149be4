// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Marker rollout: a PodProbeMarker in dry run has its probes placed and run, and its results land
// in NodePodProbe status and in the marker's counts, but nothing is written on pods (no condition,
// label or annotation; what the marker had written while live is removed, as for a deleted marker).
//
// The switch and the counts are annotations on the marker, not spec or status fields: beside
// OpenKruise the installed CRD may be Kruise's, whose structural schema prunes any field it does not
// know (its PodProbeMarker status has only observedGeneration and matchedPods), so a field would be
// dropped silently there. Annotations survive either CRD. The counts are written by the cluster
// deployment with a merge patch of the marker's metadata (only the keys below; never the spec),
// and only when they change.
const (
	// AnnotationDryRun "true" puts the marker in dry run; "false" or absent runs it live. Any other
	// value is refused at admission.
	AnnotationDryRun = "probeshim.io/dry-run"

	// AnnotationResults is the JSON of ResultCounts: per probe, how many pods are in each state as
	// their nodes last reported. Written by the deployment.
	AnnotationResults = "probeshim.io/results"
	// AnnotationResultsSummary is the same counts summed over the probes, as text for
	// `kubectl get ppm`: "Succeeded=3 Failed=1 Unknown=0 Error=0".
	AnnotationResultsSummary = "probeshim.io/results-summary"
	// AnnotationUnprobed is how many pods the marker matches that no node service probes (decimal).
	AnnotationUnprobed = "probeshim.io/unprobed"
	// AnnotationUnprobedReasons says why, per reason, sorted: "NodeNotServed=2,VirtualNode=1";
	// absent when none.
	AnnotationUnprobedReasons = "probeshim.io/unprobed-reasons"
)

// Why a matched, running pod is not probed.
const (
	// UnprobedVirtualNode: the pod runs on a virtual node (virtual-kubelet, serverless pods),
	// where no node service runs.
	UnprobedVirtualNode = "VirtualNode"
	// UnprobedNodeNotServed: the pod's node has no LabelNodeServed (no node service, or a silent one).
	UnprobedNodeNotServed = "NodeNotServed"
	// UnprobedNoNodePodProbe: the pod's node has no NodePodProbe (the node is not Ready).
	UnprobedNoNodePodProbe = "NoNodePodProbe"
	// UnprobedNodeBudget: the node leaves the marker out over its probe budget.
	UnprobedNodeBudget = "NodeBudget"
)

// StateError is the count of probes that could not run: Unknown with a probe error message
// (ProbeErrorMessage). They are not also counted as Unknown.
const StateError = "Error"

// DryRun reports whether marker is in dry run. A value admission would refuse (see package
// validation) counts as dry run: when unsure, write nothing on pods.
func DryRun(marker metav1.Object) bool {
	v, ok := marker.GetAnnotations()[AnnotationDryRun]
	return ok && v != "false"
}

// StateCounts counts pods per probe state.
type StateCounts struct {
	Succeeded int `json:"Succeeded"`
	Failed    int `json:"Failed"`
	Unknown   int `json:"Unknown"`
	Error     int `json:"Error"`
}

// Add counts one state; message tells an error from a plain Unknown.
func (c *StateCounts) Add(state ProbeState, message string) {
	switch state {
	case ProbeSucceeded:
		c.Succeeded++
	case ProbeFailed:
		c.Failed++
	default:
		if _, _, ok := ParseProbeError(message); ok {
			c.Error++
		} else {
			c.Unknown++
		}
	}
}

// ResultCounts is AnnotationResults: probe name to its counts.
type ResultCounts map[string]StateCounts

// Total sums the counts over the probes.
func (r ResultCounts) Total() StateCounts {
	var t StateCounts
	for _, c := range r {
		t.Succeeded += c.Succeeded
		t.Failed += c.Failed
		t.Unknown += c.Unknown
		t.Error += c.Error
	}
	return t
}

// String is AnnotationResultsSummary's form.
func (c StateCounts) String() string {
	return fmt.Sprintf("Succeeded=%d Failed=%d Unknown=%d Error=%d", c.Succeeded, c.Failed, c.Unknown, c.Error)
}

// MarshalResults is AnnotationResults' value (JSON, keys sorted).
func MarshalResults(r ResultCounts) string {
	if r == nil {
		r = ResultCounts{}
	}
	b, _ := json.Marshal(r) // a map of plain structs: cannot fail
	return string(b)
}

// ParseResults reads AnnotationResults from marker; ok is false when it is absent or malformed
// (nothing counted yet, or written by someone else).
func ParseResults(marker metav1.Object) (ResultCounts, bool) {
	v, ok := marker.GetAnnotations()[AnnotationResults]
	if !ok {
		return nil, false
	}
	var r ResultCounts
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return nil, false
	}
	return r, true
}

// FormatUnprobed is AnnotationUnprobedReasons' value for reasons (reason to count), "" for none.
func FormatUnprobed(reasons map[string]int) string {
	keys := slices.Sorted(maps.Keys(reasons))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		if reasons[k] > 0 {
			parts = append(parts, k+"="+strconv.Itoa(reasons[k]))
		}
	}
	return strings.Join(parts, ",")
}

// ParseUnprobed reads the unprobed count and reasons from marker; ok is false when the deployment
// has not written them (or they are malformed).
func ParseUnprobed(marker metav1.Object) (total int, reasons map[string]int, ok bool) {
	a := marker.GetAnnotations()
	total, err := strconv.Atoi(a[AnnotationUnprobed])
	if err != nil || total < 0 {
		return 0, nil, false
	}
	reasons = map[string]int{}
	if s := a[AnnotationUnprobedReasons]; s != "" {
		for _, part := range strings.Split(s, ",") {
			k, v, found := strings.Cut(part, "=")
			n, err := strconv.Atoi(v)
			if !found || err != nil || k == "" {
				return 0, nil, false
			}
			reasons[k] = n
		}
	}
	return total, reasons, true
}
