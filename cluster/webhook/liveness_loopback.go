// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// checkLoopbackLiveness denies an enhanced-liveness pod whose moved liveness probes name the
// pod's loopback (host 127.0.0.1 or localhost) unless the requesting user may create
// pods/portforward in the namespace: probeshim dials that loopback inside the pod, which is what
// port-forwarding guards, as for PodProbeMarkers. It returns nil when the pod may be admitted.
func checkLoopbackLiveness(ctx context.Context, reviewer AccessReviewer, req admission.Request, moved []probedContainer) *admission.Response {
	for _, pc := range moved {
		h := &pc.c.LivenessProbe.ProbeHandler
		if !validation.NamesLoopback(h) {
			continue
		}
		path := field.NewPath("spec", pc.list).Index(pc.idx).Child("livenessProbe", "tcpSocket", "host")
		if h.HTTPGet != nil {
			path = field.NewPath("spec", pc.list).Index(pc.idx).Child("livenessProbe", "httpGet", "host")
		}
		if reviewer == nil {
			resp := admission.Errored(http.StatusInternalServerError, fmt.Errorf("%s: no access reviewer to check pods/portforward", path))
			return &resp
		}
		allowed, reason, err := mayCreate(ctx, reviewer, req, "portforward")
		if err != nil {
			resp := admission.Errored(http.StatusInternalServerError,
				fmt.Errorf("checking whether %s may create pods/portforward: %w", req.UserInfo.Username, err))
			return &resp
		}
		if allowed {
			return nil // one review covers every container of the pod
		}
		msg := fmt.Sprintf("user %s may not create pods/portforward in namespace %s; enhanced liveness probes naming 127.0.0.1 "+
			"or localhost reach the pod's own loopback", req.UserInfo.Username, req.Namespace)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		resp := denied(apierrors.NewForbidden(corev1.Resource("pods"), req.Name, field.Forbidden(path, msg)))
		return &resp
	}
	return nil
}
