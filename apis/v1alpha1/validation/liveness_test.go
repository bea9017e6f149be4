// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func TestValidateContainerProbeContext(t *testing.T) {
	path := field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationContainerProbeContext)
	const at = "metadata.annotations[apps.kruise.io/container-probe-context]"
	valid := func() []v1alpha1.ContainerLivenessProbe {
		return []v1alpha1.ContainerLivenessProbe{
			{Name: "web", LivenessProbe: httpProbe("/healthz", intstr.FromInt32(8080))},
			{Name: "worker", LivenessProbe: execProbe("/bin/alive")},
		}
	}
	cases := []struct {
		name   string
		mutate func([]v1alpha1.ContainerLivenessProbe) []v1alpha1.ContainerLivenessProbe
		want   []wantErr
	}{
		{name: "valid", mutate: func(p []v1alpha1.ContainerLivenessProbe) []v1alpha1.ContainerLivenessProbe { return p }},
		{name: "empty", mutate: func([]v1alpha1.ContainerLivenessProbe) []v1alpha1.ContainerLivenessProbe { return nil }},
		{name: "container twice", mutate: func(p []v1alpha1.ContainerLivenessProbe) []v1alpha1.ContainerLivenessProbe {
			p[1].Name = "web"
			return p
		}, want: []wantErr{duplicate(at + "[1].name")}},
		{name: "no container name", mutate: func(p []v1alpha1.ContainerLivenessProbe) []v1alpha1.ContainerLivenessProbe {
			p[0].Name = ""
			return p
		}, want: []wantErr{required(at+"[0].name", "the name of a container in the pod")}},
		{name: "successThreshold must be 1", mutate: func(p []v1alpha1.ContainerLivenessProbe) []v1alpha1.ContainerLivenessProbe {
			p[1].LivenessProbe.SuccessThreshold = 3
			return p
		}, want: []wantErr{invalid(at+"[1].livenessProbe.successThreshold", "must be 1 for a liveness probe")}},
		{name: "native probe with host", mutate: func(p []v1alpha1.ContainerLivenessProbe) []v1alpha1.ContainerLivenessProbe {
			p[0].LivenessProbe.HTTPGet.Host = "169.254.169.254"
			return p
		}, want: []wantErr{forbidden(at+"[0].livenessProbe.httpGet.host", "")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, ValidateContainerProbeContext(tc.mutate(valid()), path), tc.want...)
		})
	}
}
