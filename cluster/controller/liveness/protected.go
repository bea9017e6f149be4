// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package liveness

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
)

// ConditionLivenessProtected is a pod condition of every running pod whose liveness probes
// admission moved to probeshim: True while a live node service on its node runs them, False
// (with the reason and what follows) while nothing does: the node's service is silent or was
// never there, or the probes could not be placed in its NodePodProbe. The kubelet no longer has
// them, so False means a hung container is not restarted by anyone.
const ConditionLivenessProtected corev1.PodConditionType = "probeshim.io/LivenessProtected"

// Reasons of ConditionLivenessProtected, and the events on its transitions.
const (
	ReasonNodeServiceLive   = "NodeServiceLive"
	ReasonNodeServiceSilent = "NodeServiceSilent"
	ReasonNoNodeService     = "NoNodeService"
	ReasonProbeNotPlaced    = "ProbeNotPlaced"

	EventReasonUnprotected = "LivenessUnprotected"
	EventReasonProtected   = "LivenessProtected"
)

// unprotectedPods is the number of running pods per node whose moved liveness probes nothing runs.
var unprotectedPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "probeshim_liveness_unprotected_pods",
	Help: "Running pods on the node whose liveness probes admission moved to probeshim and that nothing runs now (condition probeshim.io/LivenessProtected False): the node service is silent or absent, or the probes were left out of the node's NodePodProbe.",
}, []string{"node"})

// RegisterMetrics registers the controller's gauge on reg, as SetupWithManager does on
// controller-runtime's registry: for the metrics reference (hack/metricsdoc).
func RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(unprotectedPods) }

// protection is what the condition should say of one pod.
type protection struct {
	status          corev1.ConditionStatus
	reason, message string
}

// protectionOf is the condition of a pod on the node of npp; notPlaced says why the pod's probes
// are not in it ("" when they are, or wait for a startup probe).
func protectionOf(npp *v1alpha1.NodePodProbe, notPlaced string) protection {
	node := npp.Name
	switch since, silent := v1alpha1.NodeServiceSilence(npp); {
	case notPlaced != "":
		return protection{corev1.ConditionFalse, ReasonProbeNotPlaced,
			"the pod's liveness probes are not run: " + notPlaced}
	case silent:
		return protection{corev1.ConditionFalse, ReasonNodeServiceSilent,
			v1alpha1.SilentMessage(node, since) + ": the pod's liveness probes are not run, and nothing restarts a hung container"}
	case npp.Annotations[v1alpha1.AnnotationNodeService] != v1alpha1.NodeServiceLive:
		return protection{corev1.ConditionFalse, ReasonNoNodeService, fmt.Sprintf(
			"no probeshim node service renews its heartbeat on node %s: the pod's liveness probes, which admission took from the kubelet, are not run "+
				"(install and start probeshim there: systemctl status probeshim)", node)}
	}
	return protection{corev1.ConditionTrue, ReasonNodeServiceLive,
		fmt.Sprintf("the probeshim node service on node %s runs the pod's liveness probes", node)}
}

// protect sets ConditionLivenessProtected on each running pod of pods whose liveness probes were
// moved, where it says something else, with an event when its status changes; skipped says why
// some pods' probes were not placed. It returns the number of pods left unprotected.
func (r *reconciler) protect(ctx context.Context, npp *v1alpha1.NodePodProbe, pods []corev1.Pod, skipped []skip) (int, error) {
	notPlaced := map[types.UID]string{}
	for _, s := range skipped {
		if notPlaced[s.pod.UID] == "" {
			notPlaced[s.pod.UID] = s.reason
		}
	}
	unprotected := 0
	for i := range pods {
		pod := &pods[i]
		if !v1alpha1.UsesEnhancedLiveness(pod) || pod.Annotations[v1alpha1.AnnotationContainerProbeContext] == "" ||
			!nppspec.Probeable(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		want := protectionOf(npp, notPlaced[pod.UID])
		if want.status != corev1.ConditionTrue {
			unprotected++
		}
		var cur *corev1.PodCondition
		for j := range pod.Status.Conditions {
			if pod.Status.Conditions[j].Type == ConditionLivenessProtected {
				cur = &pod.Status.Conditions[j]
			}
		}
		if cur != nil && cur.Status == want.status && cur.Reason == want.reason && cur.Message == want.message {
			continue
		}
		cond := corev1.PodCondition{Type: ConditionLivenessProtected, Status: want.status, Reason: want.reason,
			Message: want.message, LastTransitionTime: metav1.Now()}
		if cur != nil && cur.Status == want.status {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID},
			"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
		if err != nil {
			return 0, err
		}
		target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
		if err := r.client.Status().Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, body)); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return 0, fmt.Errorf("setting %s on pod %s/%s: %w", ConditionLivenessProtected, pod.Namespace, pod.Name, err)
		}
		switch {
		case want.status != corev1.ConditionTrue && (cur == nil || cur.Status == corev1.ConditionTrue):
			r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventReasonUnprotected, "CheckLiveness", "%s", want.message)
		case want.status == corev1.ConditionTrue && cur != nil && cur.Status != corev1.ConditionTrue:
			r.recorder.Eventf(pod, nil, corev1.EventTypeNormal, EventReasonProtected, "CheckLiveness", "%s", want.message)
		}
	}
	return unprotected, nil
}
