// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// EstimateMarker counts what a marker places on a node's selected, probeable pods, replaces the
// marker's own current probes rather than adding to them, and says when the node would leave the
// marker out.
func TestEstimateMarker(t *testing.T) {
	tcp := corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
	m := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "m"}, Spec: v1alpha1.PodProbeMarkerSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Probes: []v1alpha1.PodContainerProbe{{Name: "x", ContainerName: "app", Probe: v1alpha1.ContainerProbeSpec{Probe: tcp}},
			{Name: "y", ContainerName: "sidecar", Probe: v1alpha1.ContainerProbeSpec{Probe: tcp}}}}}
	pod := func(name string, labels map[string]string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, UID: "uid-name", Labels: labels},
			Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "app"}}},
			Status: corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}}}
	}
	pods := []corev1.Pod{pod("web-1", map[string]string{"app": "web"}), pod("web-2", map[string]string{"app": "web"}), pod("db", map[string]string{"app": "db"})}
	unprobeable := pod("web-3", map[string]string{"app": "web"})
	unprobeable.Status.PodIP = ""
	pods = append(pods, unprobeable)

	est := EstimateMarker(m, pods, nil, "n1", DefaultNodeBudget)
	if est.Pods != 2 || est.Probes != 2 || est.Bytes <= 0 || est.NodeBytes != est.Bytes || est.LeftOut != "" {
		t.Errorf("estimate %+v", est)
	}
	if len(est.Skipped) != 2 || !strings.Contains(est.Skipped[0], `probe y: pod has no container "sidecar"`) {
		t.Errorf("skipped %q", est.Skipped)
	}

	// The marker's current entry on the node is replaced, not counted twice.
	npp := &v1alpha1.NodePodProbe{Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: "web-1", Namespace: "a", UID: "uid-name",
		IP: "10.0.0.1", Probes: []v1alpha1.ContainerProbe{{Name: "m#x", ContainerName: "app", Probe: v1alpha1.ContainerProbeSpec{Probe: tcp}}}}}}}
	if again := EstimateMarker(m, pods, npp, "n1", DefaultNodeBudget); again.NodeBytes != est.NodeBytes {
		t.Errorf("with its own entry in place: %+v, without: %+v", again, est)
	}

	// A budget smaller than the marker's probes leaves it out, and says why.
	small := EstimateMarker(m, pods, nil, "n1", est.Bytes-1)
	if !strings.Contains(small.LeftOut, "node n1 has no room for its probes") || small.NodeBytes != 0 {
		t.Errorf("over the budget: %+v", small)
	}
}
