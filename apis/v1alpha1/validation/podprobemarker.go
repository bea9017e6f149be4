// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// ValidatePodProbeMarker checks a PodProbeMarker on create.
func ValidatePodProbeMarker(ppm *v1alpha1.PodProbeMarker) field.ErrorList {
	errs := validateOnSilent(ppm.Annotations)
	errs = append(errs, validateDryRun(ppm.Annotations)...)
	errs = append(errs, validateExecFreeMarker(ppm)...)
	return append(errs, ValidatePodProbeMarkerSpec(&ppm.Spec, field.NewPath("spec"))...)
}

// validateOnSilent checks the marker's AnnotationOnNodeServiceSilent, when set.
func validateOnSilent(annotations map[string]string) field.ErrorList {
	v, ok := annotations[v1alpha1.AnnotationOnNodeServiceSilent]
	if !ok || v == v1alpha1.OnSilentRemoveMarks || v == v1alpha1.OnSilentKeepMarks {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationOnNodeServiceSilent),
		v, []string{v1alpha1.OnSilentRemoveMarks, v1alpha1.OnSilentKeepMarks})}
}

// validateDryRun checks the marker's AnnotationDryRun, when set: a typo must not leave a marker the
// user meant to try out writing on pods, nor one meant live writing nothing.
func validateDryRun(annotations map[string]string) field.ErrorList {
	v, ok := annotations[v1alpha1.AnnotationDryRun]
	if !ok || v == "true" || v == "false" {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationDryRun),
		v, []string{"true", "false"})}
}

// ValidatePodProbeMarkerUpdate checks a PodProbeMarker on update: the new object must be valid and
// its selector unchanged, because the marker must keep cleaning up the pods it already labelled.
func ValidatePodProbeMarkerUpdate(newObj, oldObj *v1alpha1.PodProbeMarker) field.ErrorList {
	errs := grandfatherKernelFS(grandfatherReserved(ValidatePodProbeMarker(newObj), newObj, oldObj), oldObj)
	if !equality.Semantic.DeepEqual(newObj.Spec.Selector, oldObj.Spec.Selector) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "selector"),
			metav1.FormatLabelSelector(newObj.Spec.Selector),
			"field is immutable: delete the PodProbeMarker and create a new one to probe other pods"))
	}
	return errs
}

// ValidatePodProbeMarkerSpec checks the spec of a PodProbeMarker.
//
// Probe names must be unique and must not contain '#' (NodePodProbe joins "<marker>#<probe>").
// Otherwise they are free text as in OpenKruise ("Idle", "is idle", "example.com/ready"), bounded
// by MaxProbeNameLength and without control characters, which would garble events and logs. A
// probe name is only ever a key inside NodePodProbe and a value in events, logs and the status
// socket: never a label, a condition type or a metric label.
func ValidatePodProbeMarkerSpec(spec *v1alpha1.PodProbeMarkerSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := fldPath.Child("selector")
	switch sel := spec.Selector; {
	case sel == nil:
		errs = append(errs, field.Required(selPath, "a label selector for the pods to probe, e.g. matchLabels: {app: web}"))
	case len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0:
		errs = append(errs, field.Invalid(selPath, metav1.FormatLabelSelector(sel),
			"must not be empty: an empty selector matches every pod in the namespace"))
	default:
		errs = append(errs, metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, selPath)...)
	}

	probesPath := fldPath.Child("probes")
	if len(spec.Probes) == 0 {
		return append(errs, field.Required(probesPath, "at least one probe is required"))
	}
	names := map[string]bool{}
	conditions := map[string]bool{}
	for i := range spec.Probes {
		p := &spec.Probes[i]
		pPath := probesPath.Index(i)
		errs = append(errs, validateMarkerProbeName(p.Name, pPath.Child("name"))...)
		if p.Name != "" {
			if names[p.Name] {
				errs = append(errs, field.Duplicate(pPath.Child("name"), p.Name))
			}
			names[p.Name] = true
		}
		errs = append(errs, validateContainerName(p.ContainerName, pPath.Child("containerName"))...)
		errs = append(errs, ValidateProbe(&p.Probe.Probe, ProbeOptions{}, pPath.Child("probe"))...)

		if c := p.PodConditionType; c != "" {
			cPath := pPath.Child("podConditionType")
			errs = append(errs, qualifiedName(c, cPath)...)
			if conditions[c] {
				errs = append(errs, field.Duplicate(cPath, c))
			}
			conditions[c] = true
		}
		errs = append(errs, validateMarkerPolicies(p.MarkerPolicy, pPath.Child("markerPolicy"))...)
		errs = append(errs, validateReservedMarks(p, pPath)...)
	}
	errs = append(errs, validateMarkerBounds(spec, fldPath)...)
	return capBadValues(errs)
}

func validateMarkerProbeName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "a probe name, unique within the PodProbeMarker")}
	}
	if strings.Contains(name, v1alpha1.ProbeNameSeparator) {
		return field.ErrorList{field.Invalid(fldPath, name,
			"must not contain '#', which joins the marker and probe names in NodePodProbe")}
	}
	if !utf8.ValidString(name) {
		return field.ErrorList{field.Invalid(fldPath, name, "must be valid UTF-8")}
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }); i >= 0 {
		return field.ErrorList{field.Invalid(fldPath, name, "must not contain control or other non-printable characters")}
	}
	if strings.TrimSpace(name) == "" {
		return field.ErrorList{field.Invalid(fldPath, name, "must not be only spaces")}
	}
	return nil
}

// PodProbeMarkerWarnings are admission warnings for a marker that is valid but probably not what
// its author meant.
func PodProbeMarkerWarnings(spec *v1alpha1.PodProbeMarkerSpec) []string {
	var out []string
	for i := range spec.Probes {
		p := &spec.Probes[i]
		if p.PodConditionType == "" && len(p.MarkerPolicy) == 0 {
			out = append(out, fmt.Sprintf("spec.probes[%d] (%q) sets neither podConditionType nor markerPolicy: "+
				"its result is recorded only in the NodePodProbe status of the pod's node, nothing on the pod", i, p.Name))
		}
	}
	return out
}

func validateMarkerPolicies(policies []v1alpha1.ProbeMarkerPolicy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[v1alpha1.ProbeState]bool{}
	for i := range policies {
		pol := &policies[i]
		pPath := fldPath.Index(i)
		sPath := pPath.Child("state")
		switch pol.State {
		case v1alpha1.ProbeSucceeded, v1alpha1.ProbeFailed:
			if seen[pol.State] {
				errs = append(errs, field.Duplicate(sPath, pol.State))
			}
			seen[pol.State] = true
		case "":
			errs = append(errs, field.Required(sPath, "Succeeded or Failed"))
		default:
			errs = append(errs, field.NotSupported(sPath, pol.State,
				[]v1alpha1.ProbeState{v1alpha1.ProbeSucceeded, v1alpha1.ProbeFailed}))
		}
		if len(pol.Labels) == 0 && len(pol.Annotations) == 0 {
			errs = append(errs, field.Required(pPath, "set labels, annotations or both to put on the pod in this state"))
		}
		for _, k := range sortedKeys(pol.Labels) {
			kPath := pPath.Child("labels").Key(k)
			errs = append(errs, qualifiedName(k, kPath)...)
			for _, msg := range utilvalidation.IsValidLabelValue(pol.Labels[k]) {
				errs = append(errs, field.Invalid(kPath, pol.Labels[k], msg))
			}
		}
		for _, k := range sortedKeys(pol.Annotations) {
			// Annotation keys are qualified names compared case-insensitively.
			for _, msg := range utilvalidation.IsQualifiedName(strings.ToLower(k)) {
				errs = append(errs, field.Invalid(pPath.Child("annotations").Key(k), k, msg))
			}
		}
		if err := apivalidation.ValidateAnnotationsSize(pol.Annotations); err != nil {
			errs = append(errs, field.TooLong(pPath.Child("annotations"), "", apivalidation.TotalAnnotationSizeLimitB))
		}
	}
	return errs
}
