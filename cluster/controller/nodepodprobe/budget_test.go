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

func TestFit(t *testing.T) {
	l := func(ns, name string, bytes int) markerLoad {
		return markerLoad{namespace: ns, name: name, bytes: bytes}
	}
	cases := []struct {
		name      string
		loads     []markerLoad
		available int
		out       []string // keys left out, sorted
	}{
		{name: "everything fits", loads: []markerLoad{l("a", "m", 100), l("b", "m", 100)}, available: 200},
		{name: "nothing asked", available: 100},
		{name: "greedy namespace loses, modest one keeps all",
			loads: []markerLoad{l("modest", "m", 100), l("greedy", "big", 900), l("greedy", "small", 50)}, available: 500,
			out: []string{"greedy/big"}},
		{name: "largest markers of an over-share namespace go first",
			loads: []markerLoad{l("a", "m1", 100), l("a", "m2", 200), l("a", "m3", 300), l("b", "m", 100)}, available: 450,
			out: []string{"a/m3"}},
		{name: "two namespaces over their share both lose",
			loads: []markerLoad{l("a", "m1", 300), l("a", "m2", 300), l("b", "m1", 300), l("b", "m2", 300), l("c", "m", 50)}, available: 700,
			out: []string{"a/m2", "b/m2"}},
		{name: "over-share namespaces get the same share, whatever their names",
			// c keeps its 10; a and b get 245 each: a keeps its 60 (its 200 goes), b's one marker
			// of 250 does not fit; 430 free, a's 200 comes back, b's 250 no longer fits.
			loads: []markerLoad{l("a", "m1", 200), l("a", "m2", 60), l("b", "m", 250), l("c", "m", 10)}, available: 500,
			out: []string{"b/m"}},
		{name: "room the shares leave goes back, smallest left-out marker first",
			// Share 175 each: a keeps 100, b keeps 100; 150 free: a/m2 (100) fits back, b/m2 not.
			loads: []markerLoad{l("a", "m1", 100), l("a", "m2", 100), l("b", "m1", 100), l("b", "m2", 101)}, available: 350,
			out: []string{"b/m2"}},
		{name: "one marker larger than the whole budget",
			loads: []markerLoad{l("a", "huge", 10000), l("b", "m", 100)}, available: 1000,
			out: []string{"a/huge"}},
		{name: "liveness took everything", loads: []markerLoad{l("a", "m", 1)}, available: -5, out: []string{"a/m"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := fit(slices.Clone(tc.loads), tc.available)
			var keys []string
			kept := 0
			for _, o := range out {
				keys = append(keys, o.load.key())
			}
			for _, ld := range tc.loads {
				if !slices.Contains(keys, ld.key()) {
					kept += ld.bytes
				}
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.out) {
				t.Errorf("left out %v, want %v", keys, tc.out)
			}
			if len(out) > 0 && kept > max(tc.available, 0) {
				t.Errorf("kept %d bytes > available %d", kept, tc.available)
			}
			// Same input in another order, same answer.
			rev := slices.Clone(tc.loads)
			slices.Reverse(rev)
			var again []string
			for _, o := range fit(rev, tc.available) {
				again = append(again, o.load.key())
			}
			slices.Sort(again)
			if !slices.Equal(again, keys) {
				t.Errorf("reversed input left out %v, want %v", again, keys)
			}
		})
	}
}

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
	if len(loads) != 2 || loads[0].key() != "a/m" || loads[1].key() != "a/n" {
		t.Fatalf("loads %+v", loads)
	}
	p := probe("m#x")
	one := probeCost(&p) + podCost(&entries[0])
	if loads[1].bytes != one || loads[0].bytes <= 2*one {
		t.Errorf("loads %+v, one probe on one pod costs %d", loads, one)
	}
	got := without(entries, []leftOut{{load: loads[0]}})
	if len(got) != 1 || got[0].UID != "u1" || len(got[0].Probes) != 1 || got[0].Probes[0].Name != "n#x" {
		t.Errorf("without: %+v", got)
	}
	// Liveness probes cost what they cost; marker probes are not counted for them.
	live := []v1alpha1.PodProbe{{Name: "p1", Namespace: "a", UID: "u1", Probes: []v1alpha1.ContainerProbe{probe("app-livenessProbe"), probe("m#x")}}}
	lp := probe("app-livenessProbe")
	if c := entriesCost(live, nppspec.LivenessProbes); c != probeCost(&lp)+podCost(&live[0]) {
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
