// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func probe(name string) v1alpha1.ContainerProbe {
	return v1alpha1.ContainerProbe{Name: name, ContainerName: "main", Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}
}

func pod(uid, name string, probes ...string) v1alpha1.PodProbe {
	pp := v1alpha1.PodProbe{Name: name, Namespace: "ns", UID: uid, IP: "10.0.0." + uid}
	for _, p := range probes {
		pp.Probes = append(pp.Probes, probe(p))
	}
	return pp
}

// names renders a spec as "pod:probe,probe pod:probe" for compact comparison.
func names(pods []v1alpha1.PodProbe) string {
	var parts []string
	for _, pp := range pods {
		var ps []string
		for _, p := range pp.Probes {
			ps = append(ps, p.Name)
		}
		parts = append(parts, pp.Name+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " ")
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		current []v1alpha1.PodProbe
		owns    Owner
		desired []v1alpha1.PodProbe
		want    string
	}{
		{name: "empty", owns: MarkerProbes, want: ""},
		{name: "add to empty", owns: MarkerProbes,
			desired: []v1alpha1.PodProbe{pod("2", "b", "m#p"), pod("1", "a", "m#q", "m#p")},
			want:    "a:m#p,m#q b:m#p"},
		{name: "marker replaces only its own, keeps liveness", owns: MarkerProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "m#old", "main-livenessProbe")},
			desired: []v1alpha1.PodProbe{pod("1", "a", "m#new")},
			want:    "a:m#new,main-livenessProbe"},
		{name: "liveness replaces only its own, keeps markers", owns: LivenessProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "m#p", "old-livenessProbe")},
			desired: []v1alpha1.PodProbe{pod("1", "a", "main-livenessProbe")},
			want:    "a:m#p,main-livenessProbe"},
		{name: "pod left with nothing is dropped", owns: MarkerProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "m#p"), pod("2", "b", "m#p")},
			desired: []v1alpha1.PodProbe{pod("2", "b", "m#p")},
			want:    "b:m#p"},
		{name: "pod kept for the other owner's probes", owns: MarkerProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "m#p", "c-livenessProbe")},
			want:    "a:c-livenessProbe"},
		{name: "unknown names belong to the marker side and go", owns: MarkerProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "stray")},
			want:    ""},
		{name: "unknown names are left by the liveness side", owns: LivenessProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "stray")},
			want:    "a:stray"},
		{name: "new UID for the same name replaces the old entry", owns: MarkerProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "m#p")},
			desired: []v1alpha1.PodProbe{pod("9", "a", "m#p")},
			want:    "a:m#p"},
		{name: "desired entry without probes adds nothing", owns: MarkerProbes,
			desired: []v1alpha1.PodProbe{pod("1", "a")},
			want:    ""},
		{name: "exact names: marker m1 is not m", owns: MarkerProbes,
			current: []v1alpha1.PodProbe{pod("1", "a", "m1#p", "m#p")},
			desired: []v1alpha1.PodProbe{pod("1", "a", "m1#p")},
			want:    "a:m1#p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.current)
			got := Merge(tc.current, tc.owns, tc.desired)
			if n := names(got); n != tc.want {
				t.Errorf("Merge = %q, want %q", n, tc.want)
			}
			if after, _ := json.Marshal(tc.current); string(after) != string(before) {
				t.Error("Merge modified its input")
			}
			if again := Merge(got, tc.owns, tc.desired); !Equal(again, got) {
				t.Errorf("Merge is not idempotent: %q then %q", names(got), names(again))
			}
		})
	}
}

func TestMergeTakesPodFieldsFromDesired(t *testing.T) {
	cur := []v1alpha1.PodProbe{pod("1", "a", "m#p", "c-livenessProbe")}
	want := pod("1", "a", "m#p")
	want.IP = "10.9.9.9"
	got := Merge(cur, MarkerProbes, []v1alpha1.PodProbe{want})
	if len(got) != 1 || got[0].IP != "10.9.9.9" {
		t.Fatalf("IP not taken from desired: %+v", got)
	}
}

func TestCanonicalOrderAndEquality(t *testing.T) {
	a := Canonical([]v1alpha1.PodProbe{pod("2", "b", "y", "x"), pod("1", "a", "z")})
	b := Canonical([]v1alpha1.PodProbe{pod("1", "a", "z"), pod("2", "b", "x", "y")})
	if !Equal(a, b) || names(a) != "a:z b:x,y" {
		t.Fatalf("canonical forms differ: %q vs %q", names(a), names(b))
	}
	if Canonical(nil) != nil || !Equal(nil, []v1alpha1.PodProbe{}) {
		t.Fatal("empty specs must compare equal")
	}
}

func TestResolvePorts(t *testing.T) {
	c := &corev1.Container{Name: "main", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "grpc", ContainerPort: 9090}}}
	for _, tc := range []struct {
		name    string
		probe   corev1.Probe
		want    int32
		wantErr string
	}{
		{name: "http named", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}, want: 8080},
		{name: "tcp named", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("grpc")}}}, want: 9090},
		{name: "number kept", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(81)}}}, want: 81},
		{name: "number as string", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("82")}}}, want: 82},
		{name: "unknown name", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("metrics")}}},
			wantErr: `httpGet: container "main" has no port named "metrics"`},
		{name: "exec untouched", probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"x"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.probe.DeepCopy()
			got, err := ResolvePorts(in, c)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var port intstr.IntOrString
			switch {
			case got.HTTPGet != nil:
				port = got.HTTPGet.Port
			case got.TCPSocket != nil:
				port = got.TCPSocket.Port
			default:
				return
			}
			if port.Type != intstr.Int || port.IntVal != tc.want {
				t.Fatalf("port = %v, want %d", port, tc.want)
			}
			if tc.probe.HTTPGet != nil && in.HTTPGet.Port != tc.probe.HTTPGet.Port {
				t.Fatal("input modified")
			}
		})
	}
}

func TestProbeable(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}}}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{name: "running initialised", change: func(*corev1.Pod) {}, want: true},
		{name: "unscheduled", change: func(p *corev1.Pod) { p.Spec.NodeName = "" }},
		{name: "no IP", change: func(p *corev1.Pod) { p.Status.PodIP = "" }},
		{name: "not initialised", change: func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }},
		{name: "no Initialized condition", change: func(p *corev1.Pod) { p.Status.Conditions = nil }},
		{name: "terminating", change: func(p *corev1.Pod) { p.DeletionTimestamp = &now }},
		{name: "succeeded", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
		{name: "failed", change: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.change(p)
			if got := Probeable(p); got != tc.want {
				t.Fatalf("Probeable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectorMatches(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{"app": "web"}}}
	m := func(ns string, sel *metav1.LabelSelector) *v1alpha1.PodProbeMarker {
		return &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: v1alpha1.PodProbeMarkerSpec{Selector: sel}}
	}
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	for name, tc := range map[string]struct {
		m    *v1alpha1.PodProbeMarker
		want bool
	}{
		"match":           {m("ns", web), true},
		"other namespace": {m("other", web), false},
		"nil selector":    {m("ns", nil), false},
		"empty selector":  {m("ns", &metav1.LabelSelector{}), false},
		"no match":        {m("ns", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}), false},
	} {
		if got := SelectorMatches(tc.m, p); got != tc.want {
			t.Errorf("%s: SelectorMatches = %v, want %v", name, got, tc.want)
		}
	}
}

func TestReported(t *testing.T) {
	var r Reported
	steps := []struct {
		node string
		keys []string
		want []int
	}{
		{"n1", []string{"a", "b", "a"}, []int{0, 1}},
		{"n1", []string{"a", "b"}, nil},      // nothing new
		{"n2", []string{"a"}, []int{0}},      // per node
		{"n1", []string{"b"}, nil},           // a went away
		{"n1", []string{"a", "b"}, []int{0}}, // and came back
		{"n1", nil, nil},                     // all gone
		{"n1", []string{"b"}, []int{0}},
	}
	for i, s := range steps {
		if got := r.Fresh(s.node, s.keys); !slices.Equal(got, s.want) {
			t.Fatalf("step %d: Fresh(%s, %v) = %v, want %v", i, s.node, s.keys, got, s.want)
		}
	}
	r.Forget("n2")
	if got := r.Fresh("n2", []string{"a"}); !slices.Equal(got, []int{0}) {
		t.Fatalf("after Forget: %v", got)
	}
}
