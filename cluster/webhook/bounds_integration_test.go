// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

const mib = 1 << 20

// The sizes that, before the bounds, let one tenant push its node's NodePodProbe past etcd's
// limit: refused at admission, by the webhook where only it can say so and by the CRD schema
// where it can, each with the field path. No error repeats the huge value.
func TestPodProbeMarkerSizeBounds(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	p0 := "spec.probes[0]"
	cases := []struct {
		name   string
		mut    func(*v1alpha1.PodProbeMarker)
		field  string
		detail string
		by     string // "webhook" or "schema"
	}{
		{"1 MiB header value", httpGet(func(h *corev1.HTTPGetAction) {
			h.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Big", Value: strings.Repeat("v", mib)}}
		}), p0 + ".probe.httpGet.httpHeaders[0].value", "may not be more than 1024 bytes", "webhook"},
		{"1 MiB exec argument", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", strings.Repeat("x", mib)}}}
		}, p0 + ".probe.exec.command", "may not be more than 4096 bytes", "webhook"},
		{"5,000 probes", func(m *v1alpha1.PodProbeMarker) {
			p := m.Spec.Probes[0]
			m.Spec.Probes = nil
			for i := range 5000 {
				q := *p.DeepCopy()
				q.Name, q.PodConditionType = fmt.Sprintf("p%d", i), fmt.Sprintf("game.io/p%d", i)
				m.Spec.Probes = append(m.Spec.Probes, q)
			}
		}, "spec.probes", "must have at most 32 items", "schema"},
		{"17 headers", httpGet(func(h *corev1.HTTPGetAction) {
			for i := range 17 {
				h.HTTPHeaders = append(h.HTTPHeaders, corev1.HTTPHeader{Name: fmt.Sprintf("X-H%d", i), Value: "v"})
			}
		}), p0 + ".probe.httpGet.httpHeaders", "may have at most 16 headers", "schema"},
		{"65 exec arguments", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: strings.Split(strings.Repeat("a", 65), "")}}
		}, p0 + ".probe.exec.command", "may have at most 64 arguments", "schema"},
		{"long path", httpGet(func(h *corev1.HTTPGetAction) { h.Path = "/" + strings.Repeat("p", 4096) }),
			p0 + ".probe.httpGet.path", "may not be more than 2048 characters", "schema"},
		{"long probe name", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = strings.Repeat("n", 250) + ".example.com/x" },
			p0 + ".name", "may not be more than 253", "schema"},
		{"17 labels", func(m *v1alpha1.PodProbeMarker) {
			for i := range 17 {
				m.Spec.Probes[0].MarkerPolicy[0].Labels[fmt.Sprintf("l%d", i)] = "v"
			}
		}, p0 + ".markerPolicy[0].labels", "must have at most 16 items", "schema"},
		{"all policies over 64 KiB", func(m *v1alpha1.PodProbeMarker) {
			for i := range 20 {
				q := *m.Spec.Probes[0].DeepCopy()
				q.Name, q.PodConditionType = fmt.Sprintf("p%d", i), fmt.Sprintf("game.io/p%d", i)
				q.MarkerPolicy[0].Annotations = map[string]string{"example.com/a": strings.Repeat("v", 4000)}
				m.Spec.Probes = append(m.Spec.Probes, q)
			}
		}, "spec.probes", "may not be more than 65536 bytes", "webhook"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := validMarker(fmt.Sprintf("bounds-%d", i))
			tc.mut(m)
			err := testEnv.admin.Create(ctx, m)
			if err == nil {
				t.Fatalf("created %s", m.Name)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("not an Invalid error: %.500v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.detail) {
				t.Errorf("error does not name %s with %q: %.1000s", tc.field, tc.detail, msg)
			}
			if byWebhook := strings.Contains(msg, ppmWebhook); byWebhook != (tc.by == "webhook") {
				t.Errorf("want it refused by the %s: %.1000s", tc.by, msg)
			}
			if !hasCause(err, tc.field) {
				t.Errorf("no status cause on %s", tc.field)
			}
			if len(msg) > 16<<10 {
				t.Errorf("error message is %d bytes", len(msg))
			}
		})
	}
}

// The liveness context takes the same handler bounds: a liveness probe probeshim would have to
// place on the node is refused at pod creation.
func TestLivenessWebhookSizeBounds(t *testing.T) {
	needEnv(t)
	pod := livenessPod("games", "huge-liveness", optIn)
	pod.Spec.Containers[2].LivenessProbe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Big", Value: strings.Repeat("v", 64<<10)}}
	pod.Spec.Containers[2].LivenessProbe.HTTPGet.Port = intstr.FromInt32(8080)
	err := testEnv.admin.Create(context.Background(), pod)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %.500v", err)
	}
	for _, want := range []string{
		`admission webhook "enhanced-liveness.pods.probeshim.io" denied the request`,
		"spec.containers[2].livenessProbe.httpGet.httpHeaders[0].value", "may not be more than 1024 bytes",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %.1000s", want, err)
		}
	}
}
