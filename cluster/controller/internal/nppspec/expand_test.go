// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The cases of the kubelet's expansion (k8s.io/kubernetes third_party/forked/golang/expansion,
// as used by ExpandContainerCommandOnlyStatic for probes).
func TestExpandCommand(t *testing.T) {
	env := []corev1.EnvVar{
		{Name: "PORT", Value: "8080"},
		{Name: "DIR", Value: "/srv/game"},
		{Name: "EMPTY", Value: ""},
		{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
		{Name: "REF", Value: "$(PORT)"},
	}
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(PORT)", "8080"},
		{"--port=$(PORT)", "--port=8080"},
		{"$(DIR)/idle.sh $(PORT)", "/srv/game/idle.sh 8080"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$$(PORT)", "$(PORT)"},
		{"$$$(PORT)", "$8080"},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$PORT", "$PORT"},
		{"$(PORT", "$(PORT"},
		{"$(PORT$(DIR)", "$(PORT$(DIR)"}, // the kubelet reads "PORT$(DIR" as the name: unknown, kept
		{"$()", "$()"},
		{"$(EMPTY)x", "x"},
		{"$(SECRET)", ""},     // valueFrom: no static value, as in the kubelet
		{"$(REF)", "$(PORT)"}, // values are not expanded again
		{"ü$(PORT)ü", "ü8080ü"},
		{"$ü", "$ü"},
	}
	for _, tc := range cases {
		if got := ExpandCommand([]string{tc.in}, env); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("expand %q = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := ExpandCommand(nil, env); got != nil {
		t.Errorf("nil command became %q", got)
	}
}
