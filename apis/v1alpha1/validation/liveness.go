// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// ValidateContainerProbeContext checks the entries of the apps.kruise.io/container-probe-context
// annotation: one entry per container, each a valid liveness probe. Pass the annotation's path,
// e.g. field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationContainerProbeContext).
func ValidateContainerProbeContext(probes []v1alpha1.ContainerLivenessProbe, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i := range probes {
		p := &probes[i]
		pPath := fldPath.Index(i)
		errs = append(errs, validateContainerName(p.Name, pPath.Child("name"))...)
		if p.Name != "" {
			if seen[p.Name] {
				errs = append(errs, field.Duplicate(pPath.Child("name"), p.Name))
			}
			seen[p.Name] = true
		}
		errs = append(errs, ValidateProbe(&p.LivenessProbe, ProbeOptions{Liveness: true}, pPath.Child("livenessProbe"))...)
	}
	return errs
}
