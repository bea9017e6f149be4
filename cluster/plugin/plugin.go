// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package plugin is the work of `kubectl probeshim`, the kubectl plugin (its command line:
// package cli): what probeshim does in a cluster, read from the objects its cluster part and node
// services write (Node labels, heartbeat Leases, NodePodProbes, pod conditions, events,
// ConfigMaps), and the two actions a person takes by hand (a server-side dry run of a
// PodProbeMarker, a container restart). `probeshim-cluster explain` shares Explain.
//
// The -o json and -o yaml output of status and explain is the Go types Status and Explanation:
// fields are added, never renamed or removed, within apiVersion OutputAPIVersion.
package plugin

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// OutputAPIVersion versions the -o json|yaml structures.
const OutputAPIVersion = "kubectl-probeshim/v1"

// DefaultClusterNamespace is the cluster part's namespace in cluster/deploy and the chart.
const DefaultClusterNamespace = "probeshim-system"

// Scheme knows the kinds the plugin reads: Kubernetes' and apps.kruise.io/v1alpha1.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registrations
		}
	}
	return s
}

// age is now - t in whole seconds, or nil for a zero t.
func age(now, t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	s := int64(now.Sub(t) / time.Second)
	return &s
}

// humanAge writes seconds as kubectl's AGE column does (45s, 3m10s, 2d5h); "-" for none.
func humanAge(s *int64) string {
	if s == nil {
		return "-"
	}
	return duration.HumanDuration(time.Duration(*s) * time.Second)
}
