// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

func testPod(name string, lbls map[string]string) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: lbls},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "main", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "side"},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}},
	}
}

// withStartup gives p's container main a startup probe and the kubelet's started flag for it.
func withStartup(p corev1.Pod, started bool) corev1.Pod {
	p.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Started: &started}, {Name: "side", Started: ptr.To(true)}}
	return p
}

func execProbe(name, container string) v1alpha1.PodContainerProbe {
	return v1alpha1.PodContainerProbe{Name: name, ContainerName: container, PodConditionType: "game.io/" + name,
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/" + name}}}}}}
}

func httpProbe(name, port string) v1alpha1.PodContainerProbe {
	return v1alpha1.PodContainerProbe{Name: name, ContainerName: "main", PodConditionType: "game.io/" + name,
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString(port)}}}}}
}

func testMarker(name string, sel map[string]string, probes ...v1alpha1.PodContainerProbe) v1alpha1.PodProbeMarker {
	return v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Probes: probes},
	}
}

func render(pods []v1alpha1.PodProbe) string {
	var parts []string
	for _, pp := range pods {
		var ps []string
		for _, p := range pp.Probes {
			ps = append(ps, p.Name+"@"+p.ContainerName)
		}
		parts = append(parts, pp.Name+"("+pp.IP+"):"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " ")
}

func TestDesiredEntries(t *testing.T) {
	web := map[string]string{"app": "web"}
	now := metav1.Now()
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		markers []v1alpha1.PodProbeMarker
		want    string
		skips   []string
	}{
		{name: "nothing"},
		{name: "one marker one pod",
			pods:    []corev1.Pod{testPod("a", web)},
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, execProbe("idle", "main"))},
			want:    "a(10.1.0.1):m#idle@main"},
		{name: "selector does not match",
			pods:    []corev1.Pod{testPod("a", map[string]string{"app": "db"})},
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, execProbe("idle", "main"))}},
		{name: "marker of another namespace",
			pods: []corev1.Pod{testPod("a", web)},
			markers: func() []v1alpha1.PodProbeMarker {
				m := testMarker("m", web, execProbe("idle", "main"))
				m.Namespace = "other"
				return []v1alpha1.PodProbeMarker{m}
			}()},
		{name: "marker being deleted",
			pods: []corev1.Pod{testPod("a", web)},
			markers: func() []v1alpha1.PodProbeMarker {
				m := testMarker("m", web, execProbe("idle", "main"))
				m.DeletionTimestamp = &now
				return []v1alpha1.PodProbeMarker{m}
			}()},
		{name: "pod not probeable",
			pods: func() []corev1.Pod {
				p := testPod("a", web)
				p.Status.PodIP = ""
				return []corev1.Pod{p}
			}(),
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, execProbe("idle", "main"))}},
		{name: "two markers on one container never collide",
			pods: []corev1.Pod{testPod("a", web)},
			markers: []v1alpha1.PodProbeMarker{
				testMarker("m2", web, execProbe("idle", "main")),
				testMarker("m1", web, execProbe("idle", "main"), execProbe("busy", "main")),
			},
			want: "a(10.1.0.1):m1#busy@main,m1#idle@main,m2#idle@main"},
		{name: "unresolvable port skips that probe only",
			pods:    []corev1.Pod{testPod("a", web), testPod("b", web)},
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, httpProbe("web", "nope"), execProbe("idle", "side"))},
			want:    "a(10.1.0.1):m#idle@side b(10.1.0.1):m#idle@side",
			skips:   []string{`m/web/a: httpGet: container "main" has no port named "nope"`, `m/web/b: httpGet: container "main" has no port named "nope"`}},
		{name: "missing container skips that probe only",
			pods:    []corev1.Pod{testPod("a", web)},
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, execProbe("idle", "ghost"), execProbe("ok", "main"))},
			want:    "a(10.1.0.1):m#ok@main",
			skips:   []string{`m/idle/a: pod has no container "ghost"`}},
		{name: "a probe the admission would refuse is skipped, not written",
			pods: []corev1.Pod{testPod("a", web)},
			markers: func() []v1alpha1.PodProbeMarker {
				bad := httpProbe("meta", "http")
				bad.Probe.HTTPGet.Host = "169.254.169.254"
				return []v1alpha1.PodProbeMarker{testMarker("m", web, bad, execProbe("ok", "main"))}
			}(),
			want:  "a(10.1.0.1):m#ok@main",
			skips: []string{`m/meta/a: spec.probes[0].probe.httpGet.host: Forbidden: ` + hostForbiddenText(t)}},
		{name: "a container waiting for its startup probe: its probes wait, the others' do not",
			pods:    []corev1.Pod{withStartup(testPod("a", web), false), withStartup(testPod("b", web), true)},
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, execProbe("idle", "main"), execProbe("ok", "side"))},
			want:    "a(10.1.0.1):m#ok@side b(10.1.0.1):m#idle@main,m#ok@side"},
		{name: "started unknown (no status field) holds a container with a startup probe",
			pods: func() []corev1.Pod {
				p := withStartup(testPod("a", web), true)
				p.Status.ContainerStatuses[0].Started = nil
				return []corev1.Pod{p}
			}(),
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, execProbe("idle", "main"))}},
		{name: "not started, but no startup probe: placed (the node sees a container that is not running)",
			pods: func() []corev1.Pod {
				p := withStartup(testPod("a", web), false)
				p.Spec.Containers[0].StartupProbe = nil
				return []corev1.Pod{p}
			}(),
			markers: []v1alpha1.PodProbeMarker{testMarker("m", web, execProbe("idle", "main"))},
			want:    "a(10.1.0.1):m#idle@main"},
		{name: "hostNetwork pod: declared ports only, at its IP or its loopback",
			pods: func() []corev1.Pod {
				p := testPod("h", web)
				p.Spec.HostNetwork = true
				return []corev1.Pod{p}
			}(),
			markers: func() []v1alpha1.PodProbeMarker {
				kubelet := httpProbe("kubelet", "http")
				kubelet.Probe.HTTPGet.Port = intstr.FromInt32(10250)
				lo := httpProbe("lo", "http")
				lo.Probe.HTTPGet.Host = "127.0.0.1"
				loKubelet := httpProbe("lo-kubelet", "http")
				loKubelet.Probe.HTTPGet.Host = "127.0.0.1"
				loKubelet.Probe.HTTPGet.Port = intstr.FromInt32(10248)
				return []v1alpha1.PodProbeMarker{testMarker("m", web, httpProbe("web", "http"), kubelet, lo, loKubelet, execProbe("ok", "main"))}
			}(),
			want: "h(10.1.0.1):m#lo@main,m#ok@main,m#web@main",
			skips: []string{
				"m/kubelet/h: pod h uses the host network: a marker probe may only go to a port the pod declares in a containerPort, and 10250 is not one",
				"m/lo-kubelet/h: pod h uses the host network: a marker probe may only go to a port the pod declares in a containerPort, and 10248 is not one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := desiredEntries(tc.pods, tc.markers)
			if r := render(got); r != tc.want {
				t.Errorf("entries = %q, want %q", r, tc.want)
			}
			var skips []string
			for _, s := range skipped {
				skips = append(skips, s.marker.Name+"/"+s.probe+"/"+s.pod.Name+": "+s.reason)
			}
			if strings.Join(skips, "\n") != strings.Join(tc.skips, "\n") {
				t.Errorf("skips = %q, want %q", skips, tc.skips)
			}
		})
	}
}

func TestDesiredEntriesResolvesNamedPorts(t *testing.T) {
	web := map[string]string{"app": "web"}
	m := testMarker("m", web, httpProbe("web", "http"))
	orig := m.Spec.Probes[0].Probe.HTTPGet.Port
	got, _ := desiredEntries([]corev1.Pod{testPod("a", web)}, []v1alpha1.PodProbeMarker{m})
	if len(got) != 1 || len(got[0].Probes) != 1 {
		t.Fatalf("entries = %q", render(got))
	}
	if p := got[0].Probes[0].Probe.HTTPGet.Port; p != intstr.FromInt32(8080) {
		t.Fatalf("port = %v, want 8080", p)
	}
	if m.Spec.Probes[0].Probe.HTTPGet.Port != orig {
		t.Fatal("marker modified")
	}
	if got[0].UID != "uid-a" || got[0].Namespace != "ns" {
		t.Fatalf("pod identity = %+v", got[0])
	}
}

func TestPlacedOn(t *testing.T) {
	web := map[string]string{"app": "web"}
	m := testMarker("m", web, execProbe("idle", "main"))
	a := testPod("a", web)
	want, _ := desiredEntries([]corev1.Pod{a}, []v1alpha1.PodProbeMarker{m})
	npp := func(pods ...v1alpha1.PodProbe) *v1alpha1.NodePodProbe {
		return &v1alpha1.NodePodProbe{Spec: v1alpha1.NodePodProbeSpec{PodProbes: pods}}
	}
	other := v1alpha1.PodProbe{Name: "z", Namespace: "ns", UID: "uid-z", Probes: []v1alpha1.ContainerProbe{{Name: "m#idle", ContainerName: "main"}}}
	stale := want[0].DeepCopy()
	stale.Probes = append(stale.Probes, v1alpha1.ContainerProbe{Name: "m#gone", ContainerName: "main"})
	foreign := want[0].DeepCopy()
	foreign.Probes = append(foreign.Probes, v1alpha1.ContainerProbe{Name: "mm#idle", ContainerName: "main"},
		v1alpha1.ContainerProbe{Name: "main-livenessProbe", ContainerName: "main"})
	for name, tc := range map[string]struct {
		npp  *v1alpha1.NodePodProbe
		pods []*corev1.Pod
		want bool
	}{
		"placed":                  {npp(want...), []*corev1.Pod{&a}, true},
		"missing":                 {npp(), []*corev1.Pod{&a}, false},
		"stale probe":             {npp(*stale), []*corev1.Pod{&a}, false},
		"stale pod":               {npp(append(want, other)...), []*corev1.Pod{&a}, false},
		"other entries are fine":  {npp(*foreign), []*corev1.Pod{&a}, true},
		"nothing wanted, nothing": {npp(), nil, true},
	} {
		if got := placedOn(&m, tc.pods, tc.npp, false); got != tc.want {
			t.Errorf("%s: placedOn = %v, want %v", name, got, tc.want)
		}
	}
	// A marker the node leaves out over its budget is placed when the node holds none of its probes.
	if !placedOn(&m, []*corev1.Pod{&a}, npp(), true) || placedOn(&m, []*corev1.Pod{&a}, npp(want...), true) {
		t.Error("placedOn of a marker left out over the budget")
	}
}

// hostForbiddenText is the shared validation's message for a host field.
func hostForbiddenText(t *testing.T) string {
	p := corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "x", Port: intstr.FromInt32(1)}}}
	err := validation.ValidateProbe(&p, validation.ProbeOptions{}, nil)
	if len(err) != 1 {
		t.Fatalf("validation: %v", err)
	}
	return err[0].Detail
}

// A marker's annotation makes its `cat <path>` probes execFree in the NodePodProbe; its other
// probes, and the probes of markers without it, stay execs.
func TestDesiredEntriesExecFree(t *testing.T) {
	web := map[string]string{"app": "web"}
	script := execProbe("script", "main")
	script.Probe.Exec.Command = []string{"sh", "-c", "cat /tmp/x"}
	on := testMarker("on", web, execProbe("idle", "main"), script, httpProbe("web", "http"))
	on.Annotations = map[string]string{v1alpha1.AnnotationExecFree: "true"}
	off := testMarker("off", web, execProbe("busy", "main"))
	got, _ := desiredEntries([]corev1.Pod{testPod("a", web)}, []v1alpha1.PodProbeMarker{on, off})
	if len(got) != 1 {
		t.Fatalf("entries = %q", render(got))
	}
	want := map[string]bool{"off#busy": false, "on#idle": true, "on#script": false, "on#web": false}
	have := map[string]bool{}
	for _, p := range got[0].Probes {
		have[p.Name] = p.ExecFree
	}
	if !maps.Equal(have, want) {
		t.Fatalf("execFree by probe = %v, want %v", have, want)
	}
	if errs := validation.ValidatePodProbe(&got[0], nil); len(errs) > 0 {
		t.Fatalf("entry refused: %v", errs)
	}
}
