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
