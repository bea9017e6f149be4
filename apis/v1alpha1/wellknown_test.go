// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestWellKnownNames(t *testing.T) {
	for got, want := range map[string]string{
		AnnotationUsingEnhancedLiveness: "apps.kruise.io/using-enhanced-liveness",
		AnnotationContainerProbeContext: "apps.kruise.io/container-probe-context",
		EventReasonProbeSucceeded:       "KruiseProbeSucceeded",
		EventReasonProbeFailed:          "KruiseProbeFailed",
		EventReasonProbeError:           "ProbeError",
		LabelCRRPodUID:                  "crr.apps.kruise.io/pod-uid",
		LabelCRRNodeName:                "crr.apps.kruise.io/node-name",
		LabelCRRActive:                  "crr.apps.kruise.io/active",
		string(ProbeSucceeded):          "Succeeded",
		string(ProbeFailed):             "Failed",
		string(ProbeUnknown):            "Unknown",
		SchemeGroupVersion.String():     "apps.kruise.io/v1alpha1",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// The annotation as OpenKruise's webhook writes it.
const probeContext = `[{"name":"web","livenessProbe":{"httpGet":{"path":"/healthz","port":8080},"periodSeconds":5}},` +
	`{"name":"worker","livenessProbe":{"exec":{"command":["/bin/alive"]}}}]`

func TestContainerProbeContext(t *testing.T) {
	got, err := ParseContainerProbeContext(probeContext)
	if err != nil {
		t.Fatal(err)
	}
	want := []ContainerLivenessProbe{{
		Name: "web",
		LivenessProbe: corev1.Probe{PeriodSeconds: 5, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
	}, {
		Name:          "worker",
		LivenessProbe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/alive"}}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %+v\nwant %+v", got, want)
	}
	s, err := FormatContainerProbeContext(got)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal([]byte(s), &a)
	_ = json.Unmarshal([]byte(probeContext), &b)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("formatted %s\nwant %s", s, probeContext)
	}

	if s, _ := FormatContainerProbeContext(nil); s != "[]" {
		t.Errorf("empty context formatted as %s, want []", s)
	}
	if _, err := ParseContainerProbeContext(`{"name":"web"}`); err == nil {
		t.Error("an object instead of a list was accepted")
	}
}

func TestProbeName(t *testing.T) {
	n := ProbeName("game-server-probe", "Idle")
	if n != "game-server-probe#Idle" {
		t.Fatalf("ProbeName = %q", n)
	}
	if m, p, ok := SplitProbeName(n); !ok || m != "game-server-probe" || p != "Idle" {
		t.Errorf("SplitProbeName(%q) = %q, %q, %v", n, m, p, ok)
	}
	if _, _, ok := SplitProbeName("liveness-web"); ok {
		t.Error("a name without '#' split")
	}
}

func TestRestartableContainerFindsSidecarsOnly(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}, {Name: "sidecar", RestartPolicy: &always}},
		Containers:     []corev1.Container{{Name: "main"}},
	}}
	for name, want := range map[string]bool{"main": true, "sidecar": true, "init": false, "nope": false} {
		if got := RestartableContainer(p, name) != nil; got != want {
			t.Errorf("RestartableContainer(%q) found = %v, want %v", name, got, want)
		}
	}
}
