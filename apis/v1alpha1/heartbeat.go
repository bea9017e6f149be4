// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"fmt"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node service's heartbeat as the cluster deployment sees it. Each node service renews a
// coordination.k8s.io Lease named after its node; when the Lease is older than the deployment's
// grace, the node service is silent and every result it wrote is treated as Unknown.
//
// The deployment records the state on the node's NodePodProbe, only when it changes (never at
// each renewal), in annotations rather than status: the status is the node's to write, and a
// cluster running OpenKruise keeps Kruise's CRD schema, which has no field for it.
const (
	// AnnotationNodeService is the state of the node service's heartbeat: NodeServiceLive,
	// NodeServiceSilent or NodeServiceNoLease.
	AnnotationNodeService = "probeshim.io/node-service"
	// AnnotationNodeServiceSince is when the state began, RFC 3339: for NodeServiceSilent the
	// last heartbeat (or, without a Lease, when the deployment started watching).
	AnnotationNodeServiceSince = "probeshim.io/node-service-since"

	// NodeServiceLive: the Lease was renewed within the grace.
	NodeServiceLive = "Live"
	// NodeServiceSilent: the results of the node are not current; they count as Unknown.
	NodeServiceSilent = "Silent"
	// NodeServiceNoLease: no Lease yet, and no results that a silence would make stale.
	NodeServiceNoLease = "NoLease"

	// AnnotationProbesLate, on the heartbeat Lease (written by the node service) and on the
	// node's NodePodProbe (copied by the deployment when it changes), says which of the node's
	// probes start late and why, while they do: the node service is live, but its results are
	// older than their periods say. At most MaxProbesLateBytes.
	AnnotationProbesLate = "probeshim.io/probes-late"
	MaxProbesLateBytes   = 512
)

// LabelNodeServed is "true" on a Node while its probeshim node service renews its heartbeat
// (NodeServiceLive); the cluster deployment sets it and removes it when the service is silent or
// has no Lease. Pods opted in to enhanced liveness are scheduled only onto nodes with it
// (AnnotationServedNodeAffinity). Its prefix is one the NodeRestriction admission plugin keeps a
// kubelet from setting on its own Node: a node cannot claim to be served.
const LabelNodeServed = "node-restriction.kubernetes.io/probeshim-served"

// AnnotationServedNodeAffinity on a pod opted in to enhanced liveness chooses how admission ties
// it to nodes with LabelNodeServed, overriding the cluster's default: ServedNodeRequire (a
// required node affinity: the pod waits, Pending, until a served node can take it),
// ServedNodePrefer (a preferred one) or ServedNodeOff (none: on a node without a node service the
// pod runs without liveness).
const (
	AnnotationServedNodeAffinity = "probeshim.io/served-node-affinity"
	ServedNodeRequire            = "require"
	ServedNodePrefer             = "prefer"
	ServedNodeOff                = "off"
)

// SetProbesLate sets obj's probes-late annotation to note, bounded, or removes it when note is "".
func SetProbesLate(obj metav1.Object, note string) {
	a := obj.GetAnnotations()
	switch {
	case note != "":
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationProbesLate] = TruncateProbesLate(note)
		obj.SetAnnotations(a)
	case a != nil:
		delete(a, AnnotationProbesLate)
	}
}

// TruncateProbesLate bounds a probes-late note to MaxProbesLateBytes, on a rune boundary.
func TruncateProbesLate(s string) string {
	if len(s) <= MaxProbesLateBytes {
		return s
	}
	s = s[:MaxProbesLateBytes-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// NodeServiceSilence reports whether the node service of npp's node is recorded as silent, and
// since when.
func NodeServiceSilence(npp metav1.Object) (since time.Time, silent bool) {
	a := npp.GetAnnotations()
	if a[AnnotationNodeService] != NodeServiceSilent {
		return time.Time{}, false
	}
	since, _ = time.Parse(time.RFC3339, a[AnnotationNodeServiceSince])
	return since, true
}

// SilentMessage says that the node service of node is silent since since (zero when unknown).
func SilentMessage(node string, since time.Time) string {
	if since.IsZero() {
		return fmt.Sprintf("the probeshim node service on node %s is silent: its result is not current", node)
	}
	return fmt.Sprintf("the probeshim node service on node %s is silent since %s: its result is not current",
		node, since.UTC().Format(time.RFC3339))
}

// AnnotationOnNodeServiceSilent on a PodProbeMarker says what happens to the labels and
// annotations of its markerPolicy while the node service of a pod's node is silent:
// OnSilentRemoveMarks (the default) removes them, like an Unknown result does; OnSilentKeepMarks
// keeps those of the last result. The marker's pod conditions go Unknown either way. An annotation
// rather than a spec field, so that it survives Kruise's CRD schema (which prunes unknown fields).
const (
	AnnotationOnNodeServiceSilent = "probeshim.io/on-node-service-silent"
	OnSilentRemoveMarks           = "RemoveMarks"
	OnSilentKeepMarks             = "KeepMarks"
)

// KeepsMarksWhenSilent reports whether marker keeps its marks while a node service is silent; an
// absent or unknown value (the webhook refuses those) removes them.
func KeepsMarksWhenSilent(marker metav1.Object) bool {
	return marker.GetAnnotations()[AnnotationOnNodeServiceSilent] == OnSilentKeepMarks
}
