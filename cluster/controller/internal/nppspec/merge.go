// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package nppspec is what the controllers that write NodePodProbe specs share: which probes each
// of them owns, how its probes are merged into a spec without touching the others', how the
// result is written, and which pods are ready to be probed.
//
// Two controllers write one NodePodProbe spec: the PodProbeMarker mapping (probes named
// "<marker>#<probe>") and the enhanced-liveness mapping (probes named "<container>-livenessProbe").
// Each replaces only the probes it owns (see Owner), so neither can disturb the other, and both
// patch under an optimistic lock so neither can lose the other's write.
package nppspec

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// Owner reports whether a controller owns the NodePodProbe probe of that name.
type Owner func(probeName string) bool

// MarkerProbes owns every probe that is not an enhanced-liveness probe: the "<marker>#<probe>"
// entries, and also anything unrecognised, so that a stray entry is removed rather than left
// running forever.
func MarkerProbes(name string) bool { return !LivenessProbes(name) }

// LivenessProbes owns the "<container>-livenessProbe" entries.
func LivenessProbes(name string) bool {
	_, ok := v1alpha1.ParseLivenessProbeName(name)
	return ok
}

// Merge returns current with every probe owns accepts replaced by the probes of desired. The
// probes owns rejects are kept untouched; a pod entry left without probes is dropped; a pod in
// desired takes its name, namespace and IP from desired. The result is in canonical order (see
// Canonical), so equal inputs give equal specs. Neither argument is modified.
func Merge(current []v1alpha1.PodProbe, owns Owner, desired []v1alpha1.PodProbe) []v1alpha1.PodProbe {
	byUID := map[string]*v1alpha1.PodProbe{}
	entry := func(pp *v1alpha1.PodProbe) *v1alpha1.PodProbe {
		e, ok := byUID[pp.UID]
		if !ok {
			e = &v1alpha1.PodProbe{Name: pp.Name, Namespace: pp.Namespace, UID: pp.UID, IP: pp.IP}
			byUID[pp.UID] = e
		}
		return e
	}
	for i := range current {
		pp := &current[i]
		for j := range pp.Probes {
			if !owns(pp.Probes[j].Name) {
				e := entry(pp)
				e.Probes = append(e.Probes, *pp.Probes[j].DeepCopy())
			}
		}
	}
	for i := range desired {
		pp := &desired[i]
		if len(pp.Probes) == 0 {
			continue
		}
		e := entry(pp)
		e.Name, e.Namespace, e.IP = pp.Name, pp.Namespace, pp.IP
		for j := range pp.Probes {
			e.Probes = append(e.Probes, *pp.Probes[j].DeepCopy())
		}
	}
	out := make([]v1alpha1.PodProbe, 0, len(byUID))
	for _, e := range byUID {
		if len(e.Probes) > 0 {
			out = append(out, *e)
		}
	}
	return Canonical(out)
}

// Canonical sorts pod entries by namespace, name and UID, and each entry's probes by name, and
// drops probes whose name repeats one before it (the first wins). It returns nil for no entries,
// as the API server does, so a canonical spec compares equal to one read back.
func Canonical(pods []v1alpha1.PodProbe) []v1alpha1.PodProbe {
	if len(pods) == 0 {
		return nil
	}
	for i := range pods {
		slices.SortStableFunc(pods[i].Probes, func(a, b v1alpha1.ContainerProbe) int { return cmp.Compare(a.Name, b.Name) })
		pods[i].Probes = slices.CompactFunc(pods[i].Probes, func(a, b v1alpha1.ContainerProbe) bool { return a.Name == b.Name })
	}
	slices.SortFunc(pods, func(a, b v1alpha1.PodProbe) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return pods
}

// Equal reports whether two specs' pod lists are the same, order included.
func Equal(a, b []v1alpha1.PodProbe) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}
