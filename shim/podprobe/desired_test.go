// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// An entry without a pod IP keeps its exec probes; its network probes are refused with a reason
// instead of being dialled anywhere else (loopback, the node).
func TestDesiredRefusesNetworkProbesWithoutIP(t *testing.T) {
	probe := func(name string, h corev1.ProbeHandler) v1alpha1.ContainerProbe {
		return v1alpha1.ContainerProbe{Name: name, ContainerName: "c", Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: h}}}
	}
	spec := &v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: "p", Namespace: "ns", UID: "u", Probes: []v1alpha1.ContainerProbe{
		probe("exec", corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}),
		probe("http", corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}),
		probe("grpc", corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}),
	}}}}
	run, refused := desiredFromSpec(spec)
	if len(run) != 1 || run[0].Key.Probe != "exec" {
		t.Errorf("run %+v, want only the exec probe", run)
	}
	if len(refused) != 2 {
		t.Fatalf("refused %+v, want http and grpc", refused)
	}
	for _, r := range refused {
		if want := "spec.podProbes[0].IP: Required value: the pod's IP"; !strings.Contains(r.reason, want) {
			t.Errorf("%s: reason %q, want %q", r.key.Probe, r.reason, want)
		}
	}
}

// An execFree probe is read, not run; one whose command is not `cat <absolute path>` (a spec
// written past the webhook) is refused rather than run as something it is not.
func TestDesiredExecFree(t *testing.T) {
	probe := func(name string, execFree bool, cmd ...string) v1alpha1.ContainerProbe {
		return v1alpha1.ContainerProbe{Name: name, ContainerName: "c", ExecFree: execFree, Probe: v1alpha1.ContainerProbeSpec{
			Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}}}
	}
	spec := &v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: "p", Namespace: "ns", UID: "u", Probes: []v1alpha1.ContainerProbe{
		probe("read", true, "cat", "/tmp/idle"),
		probe("exec", false, "cat", "/tmp/idle"),
		probe("script", true, "sh", "-c", "cat /tmp/idle"),
	}}}}
	run, refused := desiredFromSpec(spec)
	got := map[string]string{}
	for _, d := range run {
		got[d.Key.Probe] = d.ReadFile
	}
	if len(got) != 2 || got["read"] != "/tmp/idle" || got["exec"] != "" {
		t.Errorf("run (probe: ReadFile) %v, want read:/tmp/idle and exec run as a command", got)
	}
	if len(refused) != 1 || refused[0].key.Probe != "script" || !strings.Contains(refused[0].reason, "execFree") {
		t.Fatalf("refused %+v, want script", refused)
	}
}

// A marker's probe may go only to a port a hostNetwork pod declares (the Network checks it); the
// pod's own liveness probe goes where its spec says, as the kubelet's does.
func TestDesiredDeclaredPortsOnlyForMarkers(t *testing.T) {
	tcp := v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(10250)}}}}
	spec := &v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: "p", Namespace: "ns", UID: "u", IP: "192.0.2.10",
		Probes: []v1alpha1.ContainerProbe{
			{Name: "m#up", ContainerName: "c", Probe: tcp},
			{Name: v1alpha1.LivenessProbeName("c"), ContainerName: "c", Probe: tcp},
		}}}}
	run, refused := desiredFromSpec(spec)
	if len(run) != 2 || len(refused) != 0 {
		t.Fatalf("run %+v, refused %+v", run, refused)
	}
	for _, d := range run {
		if want := d.Key.Probe == "m#up"; d.Pod.DeclaredPortsOnly != want {
			t.Errorf("%s: DeclaredPortsOnly %v, want %v", d.Key.Probe, d.Pod.DeclaredPortsOnly, want)
		}
	}
}
