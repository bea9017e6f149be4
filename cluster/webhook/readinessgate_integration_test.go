// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func gatePod(ns, name string, labels map[string]string, gates ...corev1.PodConditionType) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	for _, g := range gates {
		p.Spec.ReadinessGates = append(p.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
	}
	return p
}

func gatesOf(t *testing.T, p *corev1.Pod) []corev1.PodConditionType {
	t.Helper()
	got := &corev1.Pod{}
	if err := testEnv.admin.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	var out []corev1.PodConditionType
	for _, g := range got.Spec.ReadinessGates {
		out = append(out, g.ConditionType)
	}
	return out
}

// The KruisePodReady gate is added to exactly the pods that opted in, by their own label or by
// their namespace's, and to no other pod (those are not even sent to the webhook).
func TestReadinessGateWebhook(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	optedIn := map[string]string{v1alpha1.LabelKruisePodReadinessGate: "true"}
	if err := testEnv.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gated-ns", Labels: optedIn}}); err != nil {
		t.Fatal(err)
	}
	const other corev1.PodConditionType = "example.com/lb-ready"
	kpr := v1alpha1.PodConditionKruisePodReady

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want []corev1.PodConditionType
		sent bool
	}{
		{"pod label", gatePod("games", "labelled", optedIn), []corev1.PodConditionType{kpr}, true},
		{"pod label, other gates kept", gatePod("games", "other-gate", optedIn, other), []corev1.PodConditionType{other, kpr}, true},
		{"pod label, gate already there", gatePod("games", "has-gate", optedIn, kpr), []corev1.PodConditionType{kpr}, true},
		{"namespace label", gatePod("gated-ns", "in-ns", nil), []corev1.PodConditionType{kpr}, true},
		{"label false", gatePod("games", "false", map[string]string{v1alpha1.LabelKruisePodReadinessGate: "false"}), nil, false},
		{"not opted in", gatePod("games", "gate-plain", nil), nil, false},
		{"not opted in, own gate kept", gatePod("games", "own-gate", nil, other), []corev1.PodConditionType{other}, false},
		{"own namespace", gatePod(systemNamespace, "gate-own", optedIn), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testEnv.calls.get(PathPodReadinessGate)
			if err := testEnv.admin.Create(ctx, tc.pod); err != nil {
				t.Fatal(err)
			}
			if got := gatesOf(t, tc.pod); !equalGates(got, tc.want) {
				t.Errorf("readiness gates %v, want %v", got, tc.want)
			}
			if sent := testEnv.calls.get(PathPodReadinessGate) > before; sent != tc.sent {
				t.Errorf("sent to the webhook: %t, want %t", sent, tc.sent)
			}
		})
	}
}

func equalGates(a, b []corev1.PodConditionType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
