// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func countsMarker() *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
		Spec: v1alpha1.PodProbeMarkerSpec{Probes: []v1alpha1.PodContainerProbe{{Name: "idle"}, {Name: "ready"}}}}
}

// countsNPP has pods p0..pn-1 of namespace ns on node with the given probe names in the spec, and
// the given states in the status (uid -> states).
func countsNPP(node, ns string, probes []string, uids []string, states map[string][]v1alpha1.ContainerProbeState) v1alpha1.NodePodProbe {
	npp := v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for _, uid := range uids {
		pp := v1alpha1.PodProbe{Namespace: ns, Name: uid, UID: uid}
		for _, p := range probes {
			pp.Probes = append(pp.Probes, v1alpha1.ContainerProbe{Name: p})
		}
		npp.Spec.PodProbes = append(npp.Spec.PodProbes, pp)
		if st, ok := states[uid]; ok {
			npp.Status.PodProbeStatuses = append(npp.Status.PodProbeStatuses, v1alpha1.PodProbeStatus{Namespace: ns, Name: uid, UID: uid, ProbeStates: st})
		}
	}
	return npp
}

func st(name string, s v1alpha1.ProbeState, msg string) v1alpha1.ContainerProbeState {
	return v1alpha1.ContainerProbeState{Name: name, State: s, Message: msg}
}

func TestCountResults(t *testing.T) {
	m := countsMarker()
	errMsg := v1alpha1.ProbeErrorMessage("CommandNotFound", "exec: no such file")
	a := countsNPP("a", "ns", []string{"m#idle", "m#ready", "other#idle"}, []string{"u1", "u2", "u3"}, map[string][]v1alpha1.ContainerProbeState{
		"u1": {st("m#idle", v1alpha1.ProbeSucceeded, ""), st("m#ready", v1alpha1.ProbeFailed, "down"), st("other#idle", v1alpha1.ProbeFailed, "")},
		"u2": {st("m#idle", v1alpha1.ProbeFailed, "busy"), st("m#ready", v1alpha1.ProbeUnknown, errMsg)},
		// u3: placed, no result yet: Unknown.
	})
	// Same names in another namespace, and a probe no longer in the marker: not counted.
	b := countsNPP("b", "other", []string{"m#idle"}, []string{"x1"}, map[string][]v1alpha1.ContainerProbeState{
		"x1": {st("m#idle", v1alpha1.ProbeSucceeded, "")}})
	c := countsNPP("c", "ns", []string{"m#gone", "m#idle"}, []string{"u4"}, map[string][]v1alpha1.ContainerProbeState{
		"u4": {st("m#gone", v1alpha1.ProbeSucceeded, ""), st("m#idle", v1alpha1.ProbeUnknown, "container restarted")}})
	// A silent node: its results are not current, every one is Unknown.
	d := countsNPP("d", "ns", []string{"m#idle"}, []string{"u5"}, map[string][]v1alpha1.ContainerProbeState{
		"u5": {st("m#idle", v1alpha1.ProbeSucceeded, "")}})
	d.Annotations = map[string]string{v1alpha1.AnnotationNodeService: v1alpha1.NodeServiceSilent,
		v1alpha1.AnnotationNodeServiceSince: "2026-12-04T00:00:00Z"}

	got := countResults(m, []v1alpha1.NodePodProbe{a, b, c, d})
	want := v1alpha1.ResultCounts{
		"idle":  {Succeeded: 1, Failed: 1, Unknown: 3},
		"ready": {Failed: 1, Unknown: 1, Error: 1},
	}
	if len(got) != len(want) || got["idle"] != want["idle"] || got["ready"] != want["ready"] {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if s := got.Total().String(); s != "Succeeded=1 Failed=2 Unknown=4 Error=1" {
		t.Errorf("summary = %q", s)
	}
	if s := v1alpha1.MarshalResults(got); s != `{"idle":{"Succeeded":1,"Failed":1,"Unknown":3,"Error":0},"ready":{"Succeeded":0,"Failed":1,"Unknown":1,"Error":1}}` {
		t.Errorf("annotation = %s", s)
	}

	// Nothing placed yet: every probe with zeros.
	if got := countResults(m, nil); len(got) != 2 || got["idle"] != (v1alpha1.StateCounts{}) {
		t.Errorf("counts with nothing placed = %+v", got)
	}
}

func TestUnprobedReason(t *testing.T) {
	served := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelNodeServed: "true"}}}
	unserved := &corev1.Node{}
	vkLabel := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"type": "virtual-kubelet"}}}
	vkTaint := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "virtual-kubelet.io/provider", Value: "eci", Effect: corev1.TaintEffectNoSchedule}}}}
	npp := &v1alpha1.NodePodProbe{}
	for _, c := range []struct {
		name    string
		node    *corev1.Node
		npp     *v1alpha1.NodePodProbe
		leftOut bool
		want    string
	}{
		{"served", served, npp, false, ""},
		{"served, over budget", served, npp, true, v1alpha1.UnprobedNodeBudget},
		{"no node service", unserved, npp, false, v1alpha1.UnprobedNodeNotServed},
		{"virtual node by label", vkLabel, npp, false, v1alpha1.UnprobedVirtualNode},
		{"virtual node by taint, no NodePodProbe", vkTaint, nil, false, v1alpha1.UnprobedVirtualNode},
		{"node not Ready", served, nil, false, v1alpha1.UnprobedNoNodePodProbe},
		{"node gone from the cache", nil, npp, false, v1alpha1.UnprobedNodeNotServed},
	} {
		if got := UnprobedReason(c.node, c.npp, c.leftOut); got != c.want {
			t.Errorf("%s: reason %q, want %q", c.name, got, c.want)
		}
	}
}

func TestUnprobedAnnotations(t *testing.T) {
	m := countsMarker()
	set := unprobedAnnotations(m, map[string]int{v1alpha1.UnprobedVirtualNode: 1, v1alpha1.UnprobedNodeNotServed: 2})
	if set == nil || *set[v1alpha1.AnnotationUnprobed] != "3" || *set[v1alpha1.AnnotationUnprobedReasons] != "NodeNotServed=2,VirtualNode=1" {
		t.Fatalf("annotations = %v", set)
	}
	m.Annotations = map[string]string{v1alpha1.AnnotationUnprobed: "3", v1alpha1.AnnotationUnprobedReasons: "NodeNotServed=2,VirtualNode=1"}
	if total, reasons, ok := v1alpha1.ParseUnprobed(m); !ok || total != 3 || reasons[v1alpha1.UnprobedNodeNotServed] != 2 {
		t.Errorf("parsed back: %d %v %v", total, reasons, ok)
	}
	if set := unprobedAnnotations(m, map[string]int{v1alpha1.UnprobedVirtualNode: 1, v1alpha1.UnprobedNodeNotServed: 2}); set != nil {
		t.Errorf("unchanged counts write %v", set)
	}
	// All probed again: "0" and the reasons removed.
	set = unprobedAnnotations(m, map[string]int{})
	if set == nil || *set[v1alpha1.AnnotationUnprobed] != "0" || set[v1alpha1.AnnotationUnprobedReasons] != nil {
		t.Errorf("annotations when all are probed = %v", set)
	}
	m.Annotations = map[string]string{v1alpha1.AnnotationUnprobed: "0"}
	if set := unprobedAnnotations(m, nil); set != nil {
		t.Errorf("unchanged zero writes %v", set)
	}
}

func TestResultsChangedIgnoresProbeTimes(t *testing.T) {
	old := countsNPP("a", "ns", []string{"m#idle"}, []string{"u1"}, map[string][]v1alpha1.ContainerProbeState{
		"u1": {st("m#idle", v1alpha1.ProbeSucceeded, "players: 0")}})
	refreshed := *old.DeepCopy()
	refreshed.Status.PodProbeStatuses[0].ProbeStates[0].LastProbeTime = metav1.Now()
	refreshed.Status.PodProbeStatuses[0].ProbeStates[0].Message = "players: 1"
	if stateDigest(&old) != stateDigest(&refreshed) {
		t.Error("a new probe time or output changes the digest")
	}
	failed := *old.DeepCopy()
	failed.Status.PodProbeStatuses[0].ProbeStates[0].State = v1alpha1.ProbeFailed
	if stateDigest(&old) == stateDigest(&failed) {
		t.Error("a new state leaves the digest")
	}
}
