// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// warnings collects the admission warnings the API server passes to a client.
type warnings struct{ got []string }

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.got = append(w.got, text)
}

// Markers shaped like the examples of OpenKruise's PodProbeMarker documentation and like what
// kruise-game generates are admitted, and the stored object carries the timing defaults.
func TestPodProbeMarkerKruiseExamples(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	w := &warnings{}
	cfg := rest.CopyConfig(testEnv.cfg)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: testEnv.scheme})
	if err != nil {
		t.Fatal(err)
	}
	tcp := func(port int32) v1alpha1.ContainerProbeSpec {
		return v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}}}
	}
	longName := "the game server answers on its port and has no players connected " + strings.Repeat("x", 100)
	cases := []struct {
		name        string
		probe       v1alpha1.PodContainerProbe
		wantWarning bool
	}{
		// The documentation's tcpSocket example: no podConditionType, no markerPolicy.
		{"tcpSocket without condition or policy", v1alpha1.PodContainerProbe{Name: "Idle", ContainerName: "game-server",
			Probe: func() v1alpha1.ContainerProbeSpec {
				p := tcp(8080)
				p.InitialDelaySeconds, p.PeriodSeconds = 15, 10
				return p
			}()}, true},
		{"probe name with spaces, over 63 bytes", v1alpha1.PodContainerProbe{Name: longName, ContainerName: "game-server",
			Probe: tcp(8080), PodConditionType: "example.com/idle"}, false},
		{"probe-level terminationGracePeriodSeconds 0", v1alpha1.PodContainerProbe{Name: "idle", ContainerName: "game-server",
			Probe: func() v1alpha1.ContainerProbeSpec {
				p := tcp(8080)
				p.TerminationGracePeriodSeconds = ptr.To[int64](0)
				return p
			}(), PodConditionType: "example.com/idle"}, false},
		{"path without a slash, virtual Host header", v1alpha1.PodContainerProbe{Name: "http", ContainerName: "game-server",
			Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "healthz", Port: intstr.FromInt32(8080),
				HTTPHeaders: []corev1.HTTPHeader{{Name: "Host", Value: "game.example.com"}}}}}},
			PodConditionType: "game.kruise.io/http"}, false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w.got = nil
			m := &v1alpha1.PodProbeMarker{
				ObjectMeta: metav1.ObjectMeta{Name: "kruise-example-" + string(rune('a'+i)), Namespace: "games"},
				Spec: v1alpha1.PodProbeMarkerSpec{
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game-server"}},
					Probes:   []v1alpha1.PodContainerProbe{tc.probe},
				},
			}
			if err := c.Create(ctx, m); err != nil {
				t.Fatalf("refused: %v", err)
			}
			warned := false
			for _, s := range w.got {
				warned = warned || strings.Contains(s, "sets neither podConditionType nor markerPolicy")
			}
			if warned != tc.wantWarning {
				t.Errorf("warnings %q, want the no-condition warning: %v", w.got, tc.wantWarning)
			}

			// Stored with Kruise's timing for every field left empty, and the user's where set.
			got := &v1alpha1.PodProbeMarker{}
			if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
				t.Fatal(err)
			}
			p, in := got.Spec.Probes[0].Probe.Probe, tc.probe.Probe.Probe
			or1 := func(v int32) int32 {
				if v == 0 {
					return 1
				}
				return v
			}
			if p.InitialDelaySeconds != or1(in.InitialDelaySeconds) || p.TimeoutSeconds != 1 || p.PeriodSeconds != or1(in.PeriodSeconds) ||
				p.SuccessThreshold != 1 || p.FailureThreshold != 1 {
				t.Errorf("stored timing %d/%d/%d/%d/%d (delay/timeout/period/success/failure)",
					p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
			}
			if got.Spec.Probes[0].Name != tc.probe.Name {
				t.Errorf("stored name %q", got.Spec.Probes[0].Name)
			}
		})
	}
}
