// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package liveness

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/podcache"
	"github.com/probeshim/probeshim/cluster/internal/podcache/podcachetest"
)

// TestDesiredEntriesOnSlimPods: the entries (named ports resolved, $(VAR) expanded, sidecars,
// started flags) and skips are the same from the deployment's pod cache (podcache.Packed) as from
// whole pods.
func TestDesiredEntriesOnSlimPods(t *testing.T) {
	var whole, slim []corev1.Pod
	for i := range 6 {
		p := podcachetest.Pod("shop", i, podcachetest.Options{Liveness: true})
		p.Spec.InitContainers = []corev1.Container{{Name: "log-shipper", Image: "x", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Ports: []corev1.ContainerPort{{Name: "ship", ContainerPort: 24224}}, Env: []corev1.EnvVar{{Name: "SHIP_PORT", Value: "24224"}}}}
		exec := corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"sh", "-c", "wget -qO- 127.0.0.1:8080$(HEALTH_PATH)?pod=$(POD_NAME)&x=$(UNSET)"}}}, PeriodSeconds: 5}
		probes := []v1alpha1.ContainerLivenessProbe{{Name: "app", LivenessProbe: exec},
			{Name: "proxy", LivenessProbe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("proxy-admin")}}}},
			{Name: "log-shipper", LivenessProbe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("ship")}}}}}
		switch i {
		case 1:
			probes = append(probes, v1alpha1.ContainerLivenessProbe{Name: "gone", LivenessProbe: exec})
		case 2:
			probes[1].LivenessProbe.TCPSocket.Port = intstr.FromString("no-such-port")
		case 3:
			p.Status.ContainerStatuses[0].Started = ptr.To(false)
		}
		p.Annotations[v1alpha1.AnnotationContainerProbeContext] = probeContext(t, probes...)
		whole = append(whole, *p)
		slim = append(slim, *podcache.Packed(p))
	}
	gotW, skipW := desiredEntries(whole)
	gotS, skipS := desiredEntries(slim)
	if !reflect.DeepEqual(gotW, gotS) {
		t.Errorf("entries from whole pods:\n%+v\nfrom slim pods:\n%+v", gotW, gotS)
	}
	reasons := func(s []skip) (out []string) {
		for _, k := range s {
			out = append(out, k.key())
		}
		return out
	}
	if !reflect.DeepEqual(reasons(skipW), reasons(skipS)) {
		t.Errorf("skips from whole pods %q, from slim pods %q", reasons(skipW), reasons(skipS))
	}
	if len(gotW) != 6 || len(skipW) != 2 {
		t.Fatalf("the fixture gives %d entries and %d skips, want 6 and 2: it proves less than it should", len(gotW), len(skipW))
	}
	if cmd := gotS[0].Probes[0].Probe.Exec.Command[2]; cmd != "wget -qO- 127.0.0.1:8080/healthz?pod=&x=$(UNSET)" {
		t.Errorf("expanded command from a slim pod: %q", cmd)
	}
}
