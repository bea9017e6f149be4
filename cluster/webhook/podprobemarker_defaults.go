// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// PodProbeMarkerDefaulter writes the timing defaults of v1alpha1.SetMarkerProbeDefaults into the
// probes of a PodProbeMarker, so that `kubectl get -o yaml` shows what the node runs.
//
// On CREATE every probe is defaulted. On UPDATE only probes that are new or whose probe changed:
// a marker stored before this webhook keeps the timing it ran with when only its metadata changes
// (the controller adding its finalizer, a label), since defaulting it then would silently change
// how often it probes.
type PodProbeMarkerDefaulter struct{}

var _ admission.Handler = PodProbeMarkerDefaulter{}

// Handle implements admission.Handler.
func (PodProbeMarkerDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	ppm := &v1alpha1.PodProbeMarker{}
	if err := json.Unmarshal(req.Object.Raw, ppm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding PodProbeMarker: %w", err))
	}
	before := map[string]*v1alpha1.PodContainerProbe{}
	if req.Operation == admissionv1.Update {
		old := &v1alpha1.PodProbeMarker{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old PodProbeMarker: %w", err))
		}
		for i := range old.Spec.Probes {
			before[old.Spec.Probes[i].Name] = &old.Spec.Probes[i]
		}
	}
	// A marker over the limit is refused by the validation anyway: do not spend time on it.
	if len(ppm.Spec.Probes) > validation.MaxProbesPerMarker {
		return admission.Allowed("")
	}
	var patches []jsonpatch.JsonPatchOperation
	for i := range ppm.Spec.Probes {
		p := &ppm.Spec.Probes[i]
		if o := before[p.Name]; o != nil && equality.Semantic.DeepEqual(o.Probe, p.Probe) {
			continue
		}
		in := p.Probe.Probe
		if !v1alpha1.SetMarkerProbeDefaults(&p.Probe.Probe) {
			continue
		}
		// "add" sets an object member, present or not; only fields that were empty are touched.
		base := fmt.Sprintf("/spec/probes/%d/probe/", i)
		for _, f := range []struct {
			name    string
			was, is int32
		}{
			{"initialDelaySeconds", in.InitialDelaySeconds, p.Probe.InitialDelaySeconds},
			{"timeoutSeconds", in.TimeoutSeconds, p.Probe.TimeoutSeconds},
			{"periodSeconds", in.PeriodSeconds, p.Probe.PeriodSeconds},
			{"successThreshold", in.SuccessThreshold, p.Probe.SuccessThreshold},
			{"failureThreshold", in.FailureThreshold, p.Probe.FailureThreshold},
		} {
			if f.was != f.is {
				patches = append(patches, jsonpatch.NewOperation("add", base+f.name, f.is))
			}
		}
	}
	if len(patches) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("", patches...)
}
