// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

func TestMarkerLoadsAndWithout(t *testing.T) {
	probe := func(name string) v1alpha1.ContainerProbe {
		return v1alpha1.ContainerProbe{Name: name, ContainerName: "app", Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}}}
	}
	entries := []v1alpha1.PodProbe{
		{Name: "p1", Namespace: "a", UID: "u1", IP: "10.0.0.1", Probes: []v1alpha1.ContainerProbe{probe("m#x"), probe("m#y"), probe("n#x")}},
		{Name: "p2", Namespace: "a", UID: "u2", IP: "10.0.0.2", Probes: []v1alpha1.ContainerProbe{probe("m#x")}},
	}
	loads := markerLoads(entries)
	if len(loads) != 2 || loads[0].Key() != "a/m" || loads[1].Key() != "a/n" {
		t.Fatalf("loads %+v", loads)
	}
	p := probe("m#x")
	one := nppspec.ProbeCost(&p) + nppspec.PodCost(&entries[0])
	if loads[1].Bytes != one || loads[0].Bytes <= 2*one {
		t.Errorf("loads %+v, one probe on one pod costs %d", loads, one)
	}
	got := without(entries, []nppspec.LeftOut{{Load: loads[0]}})
	if len(got) != 1 || got[0].UID != "u1" || len(got[0].Probes) != 1 || got[0].Probes[0].Name != "n#x" {
		t.Errorf("without: %+v", got)
	}
	// Liveness probes cost what they cost; marker probes are not counted for them.
	live := []v1alpha1.PodProbe{{Name: "p1", Namespace: "a", UID: "u1", Probes: []v1alpha1.ContainerProbe{probe("app-livenessProbe"), probe("m#x")}}}
	lp := probe("app-livenessProbe")
	if c := nppspec.EntriesCost(live, nppspec.LivenessProbes); c != nppspec.ProbeCost(&lp)+nppspec.PodCost(&live[0]) {
		t.Errorf("liveness cost %d", c)
	}
}

func TestBudgetBookAndMessage(t *testing.T) {
	var b budgetBook
	if ch := b.set("n1", map[string]string{"a/m": "r1"}); !slices.Equal(ch, []string{"a/m"}) {
		t.Errorf("changed %v", ch)
	}
	if ch := b.set("n1", map[string]string{"a/m": "r1"}); len(ch) != 0 {
		t.Errorf("changed %v on the same set", ch)
	}
	b.set("n2", map[string]string{"a/m": "r2"})
	if nodes, first := b.nodes("a/m"); !slices.Equal(nodes, []string{"n1", "n2"}) || first != "r1" || !b.leftOutOn("n2", "a/m") {
		t.Errorf("nodes %v %q", nodes, first)
	}
	if ch := b.set("n1", nil); !slices.Equal(ch, []string{"a/m"}) || b.leftOutOn("n1", "a/m") {
		t.Errorf("changed %v", ch)
	}
	var many []string
	for range 5000 {
		many = append(many, strings.Repeat("n", 253))
	}
	if msg := budgetMessage(many, strings.Repeat("why ", 1000)); len(msg) > 1024 || !strings.Contains(msg, "5000 node(s)") {
		t.Errorf("message %d bytes: %.100s", len(msg), msg)
	}
}
