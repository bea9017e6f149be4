// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// NodePodProbeValidator rejects NodePodProbe specs the shared validation rejects, above all host
// fields and Host headers that name anything but the pod: a probe must never be a way to reach
// node-local services. Who may write spec and status is not its job; the
// ValidatingAdmissionPolicies in cluster/deploy decide that inside the API server, so the nodes'
// constant status writes never wait for this webhook.
type NodePodProbeValidator struct{}

var _ admission.Handler = NodePodProbeValidator{}

// Handle implements admission.Handler.
func (NodePodProbeValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	npp := &v1alpha1.NodePodProbe{}
	if err := json.Unmarshal(req.Object.Raw, npp); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding NodePodProbe: %w", err))
	}
	if req.Operation == admissionv1.Update {
		old := &v1alpha1.NodePodProbe{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old NodePodProbe: %w", err))
		}
		// Ratchet: a metadata-only update (finalizers, the garbage collector) must not fail on a
		// spec that was written before a stricter rule existed.
		if equality.Semantic.DeepEqual(old.Spec, npp.Spec) {
			return admission.Allowed("")
		}
	}
	if errs := validation.ValidateNodePodProbe(npp); len(errs) > 0 {
		return denied(apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind("NodePodProbe").GroupKind(), npp.Name, errs))
	}
	return admission.Allowed("")
}
