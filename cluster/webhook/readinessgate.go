// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// ReadinessGateMutator adds the KruisePodReady readiness gate to a pod on CREATE, so that a
// ContainerRecreateRequest's strategy.unreadyGracePeriodSeconds can make the pod not ready before
// its containers are stopped. Which pods are sent is the webhook configuration's choice: those
// labelled v1alpha1.LabelKruisePodReadinessGate "true", or in a namespace so labelled (the opt-in;
// cluster/deploy/webhooks.yaml). The gate alone would keep the pod not ready: the readiness
// controller (cluster/controller/podready) adds the condition, True, as soon as it sees the pod.
//
// Idempotent: a pod that already has the gate (written by its author, or by OpenKruise's pod
// webhook, which adds it to the pods of its workloads) is admitted unchanged.
type ReadinessGateMutator struct{}

var _ admission.Handler = ReadinessGateMutator{}

// Handle implements admission.Handler.
func (ReadinessGateMutator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding pod: %w", err))
	}
	if _, mirror := pod.Annotations[annotationMirrorPod]; mirror {
		return admission.Allowed("mirror pod: its spec is the kubelet's static manifest")
	}
	for _, g := range pod.Spec.ReadinessGates {
		if g.ConditionType == v1alpha1.PodConditionKruisePodReady {
			return admission.Allowed("")
		}
	}
	gate := map[string]any{"conditionType": string(v1alpha1.PodConditionKruisePodReady)}
	op := jsonpatch.NewOperation("add", "/spec/readinessGates/-", gate)
	if len(pod.Spec.ReadinessGates) == 0 {
		op = jsonpatch.NewOperation("add", "/spec/readinessGates", []any{gate})
	}
	return admission.Patched("", op)
}
