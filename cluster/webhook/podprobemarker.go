// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// AccessReviewer creates SubjectAccessReviews; a controller-runtime client.Client is one.
type AccessReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// PodProbeMarkerValidator admits PodProbeMarkers that pass the shared validation and keep their
// selector. An exec probe runs a command inside every selected container, which is what
// `create pods/exec` guards, so a marker that adds or changes an exec probe is admitted only when
// the requesting user may create pods/exec in the marker's namespace. Likewise a network probe
// whose host names the pod's loopback reaches what only `create pods/portforward` reaches, so a
// marker that adds or changes one needs that right. Otherwise a marker would be a way around RBAC.
//
// A controller that writes exec markers but must not exec into pods itself (kruise-game's has no
// pods/exec) may instead be granted the verb "exec" on podprobemarkers.apps.kruise.io
// (VerbExecMarkers; cluster/deploy/rbac-exec-markers.yaml ships such a role, bound to nobody):
// an admin's explicit statement that this subject may have commands run through markers.
//
// A new or changed probe timeout above MaxTimeoutSeconds (0: none) is refused; one that was there
// before a lower ceiling stays, so that the marker's other edits still pass.
type PodProbeMarkerValidator struct {
	Reviewer          AccessReviewer
	MaxTimeoutSeconds int32
}

var _ admission.Handler = &PodProbeMarkerValidator{}

// Handle implements admission.Handler.
func (v *PodProbeMarkerValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	ppm := &v1alpha1.PodProbeMarker{}
	if err := json.Unmarshal(req.Object.Raw, ppm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding PodProbeMarker: %w", err))
	}
	var old *v1alpha1.PodProbeMarker
	var errs field.ErrorList
	switch req.Operation {
	case admissionv1.Create:
		errs = validation.ValidatePodProbeMarker(ppm)
	case admissionv1.Update:
		old = &v1alpha1.PodProbeMarker{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old PodProbeMarker: %w", err))
		}
		errs = validation.ValidatePodProbeMarkerUpdate(ppm, old)
	default:
		return admission.Allowed("")
	}
	errs = append(errs, v.timeoutCeiling(ppm, old)...)
	if len(errs) > 0 {
		return denied(apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind("PodProbeMarker").GroupKind(), ppm.Name, errs))
	}

	// Only new or changed exec probes need the check, so the controllers' own updates (finalizers,
	// metadata) and edits that leave the commands alone never depend on the user's exec rights.
	// Turning them exec-free, or back, changes how the same commands run: it takes the same right.
	var execPath *field.Path
	if i := firstChangedProbe(ppm, old, isExec); i >= 0 {
		execPath = field.NewPath("spec", "probes").Index(i).Child("probe", "exec")
	} else if old != nil && v1alpha1.ExecFree(old) != v1alpha1.ExecFree(ppm) && firstChangedProbe(ppm, nil, isExec) >= 0 {
		execPath = field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationExecFree)
	}
	if execPath != nil {
		if resp, ok := v.checkExec(ctx, req, ppm, execPath); !ok {
			return resp
		}
	}
	// A probe that names the pod's loopback reaches endpoints bound to 127.0.0.1 inside the pod,
	// which only `pods/portforward` reaches otherwise.
	if i := firstChangedProbe(ppm, old, namesLoopback); i >= 0 {
		if resp, ok := v.check(ctx, req, ppm, "portforward", "probes naming 127.0.0.1 or localhost reach the pod's own loopback",
			loopbackField(&ppm.Spec.Probes[i], field.NewPath("spec", "probes").Index(i).Child("probe"))); !ok {
			return resp
		}
	}
	resp := admission.Allowed("")
	resp.Warnings = validation.PodProbeMarkerWarnings(&ppm.Spec)
	return resp
}

// VerbExecMarkers is the RBAC verb on podprobemarkers that allows exec probes in markers without
// pods/exec.
const VerbExecMarkers = "exec"

// checkExec admits an exec probe when the requesting user may `exec` podprobemarkers (the
// dedicated verb) or may create pods/exec in the marker's namespace.
func (v *PodProbeMarkerValidator) checkExec(ctx context.Context, req admission.Request, ppm *v1alpha1.PodProbeMarker,
	fldPath *field.Path) (admission.Response, bool) {
	allowed, _, err := review(ctx, v.Reviewer, req, authorizationv1.ResourceAttributes{
		Namespace: req.Namespace, Verb: VerbExecMarkers, Group: v1alpha1.SchemeGroupVersion.Group, Resource: "podprobemarkers"})
	if err != nil {
		return admission.Errored(http.StatusInternalServerError,
			fmt.Errorf("checking whether %s may exec podprobemarkers: %w", req.UserInfo.Username, err)), false
	}
	if allowed {
		return admission.Response{}, true
	}
	return v.check(ctx, req, ppm, "exec", "exec probes run commands inside containers; "+
		"or have an admin grant the verb exec on podprobemarkers.apps.kruise.io (the ClusterRole probeshim-exec-markers)", fldPath)
}

// check asks whether the requesting user may create pods/<subresource> in the marker's
// namespace; ok is false with the response to return when not (or when the check failed).
func (v *PodProbeMarkerValidator) check(ctx context.Context, req admission.Request, ppm *v1alpha1.PodProbeMarker,
	subresource, why string, fldPath *field.Path) (admission.Response, bool) {
	allowed, reason, err := mayCreate(ctx, v.Reviewer, req, subresource)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError,
			fmt.Errorf("checking whether %s may create pods/%s: %w", req.UserInfo.Username, subresource, err)), false
	}
	if allowed {
		return admission.Response{}, true
	}
	msg := fmt.Sprintf("user %s may not create pods/%s in namespace %s; %s", req.UserInfo.Username, subresource, req.Namespace, why)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	fe := field.Forbidden(fldPath, msg)
	return denied(apierrors.NewForbidden(v1alpha1.Resource("podprobemarkers"), ppm.Name, fe)), false
}

func isExec(p *v1alpha1.PodContainerProbe) bool { return p.Probe.Exec != nil }

func namesLoopback(p *v1alpha1.PodContainerProbe) bool {
	return validation.NamesLoopback(&p.Probe.ProbeHandler)
}

// loopbackField is the host field through which a probe names loopback.
func loopbackField(p *v1alpha1.PodContainerProbe, probePath *field.Path) *field.Path {
	if p.Probe.HTTPGet != nil {
		return probePath.Child("httpGet", "host")
	}
	return probePath.Child("tcpSocket", "host")
}

// firstChangedProbe returns the index of the first probe of ppm for which match holds and that
// old does not have with the same name, container and handler, or -1. old is nil on create.
// timeoutCeiling refuses the probes whose timeout is above the ceiling and new or changed.
func (v *PodProbeMarkerValidator) timeoutCeiling(ppm, old *v1alpha1.PodProbeMarker) field.ErrorList {
	before := map[string]int32{}
	if old != nil {
		for _, p := range old.Spec.Probes {
			before[p.Name] = p.Probe.TimeoutSeconds
		}
	}
	var errs field.ErrorList
	for i := range ppm.Spec.Probes {
		p := &ppm.Spec.Probes[i]
		if t, ok := before[p.Name]; ok && t == p.Probe.TimeoutSeconds {
			continue
		}
		errs = append(errs, validation.ValidateTimeoutCeiling(&p.Probe.Probe, v.MaxTimeoutSeconds,
			field.NewPath("spec", "probes").Index(i).Child("probe"))...)
	}
	return errs
}

func firstChangedProbe(ppm, old *v1alpha1.PodProbeMarker, match func(*v1alpha1.PodContainerProbe) bool) int {
	before := map[string]*v1alpha1.PodContainerProbe{}
	if old != nil {
		for i := range old.Spec.Probes {
			before[old.Spec.Probes[i].Name] = &old.Spec.Probes[i]
		}
	}
	for i := range ppm.Spec.Probes {
		p := &ppm.Spec.Probes[i]
		if !match(p) {
			continue
		}
		o := before[p.Name]
		if o == nil || o.ContainerName != p.ContainerName || !match(o) || !equality.Semantic.DeepEqual(o.Probe.ProbeHandler, p.Probe.ProbeHandler) {
			return i
		}
	}
	return -1
}

// mayCreate asks the API server's authorizer whether the requesting user may create
// pods/<subresource> in the request's namespace, as exactly the user the request came from.
func mayCreate(ctx context.Context, reviewer AccessReviewer, req admission.Request, subresource string) (bool, string, error) {
	return review(ctx, reviewer, req, authorizationv1.ResourceAttributes{
		Namespace: req.Namespace, Verb: "create", Resource: "pods", Subresource: subresource})
}

// review asks the API server's authorizer whether the requesting user may do attrs.
func review(ctx context.Context, reviewer AccessReviewer, req admission.Request, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	u := req.UserInfo
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               u.Username,
		Groups:             u.Groups,
		UID:                u.UID,
		Extra:              convertExtra(u.Extra),
		ResourceAttributes: &attrs,
	}}
	if err := reviewer.Create(ctx, sar); err != nil {
		return false, "", err
	}
	return sar.Status.Allowed && !sar.Status.Denied, sar.Status.Reason, nil
}

func convertExtra(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if in == nil {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}

// denied turns an API status error into a denial that keeps its code, reason and field causes;
// the API server passes them on to the client.
func denied(err *apierrors.StatusError) admission.Response {
	st := err.Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
}
