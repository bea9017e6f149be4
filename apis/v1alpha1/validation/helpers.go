// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"maps"
	"slices"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func qualifiedName(v string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(fldPath, v, msg))
	}
	return errs
}

// validateContainerName requires a container name in the form Kubernetes allows (a DNS-1123
// label), so a typo such as "Main" fails at admission instead of never matching a container.
func validateContainerName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "the name of a container in the pod")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, "not a valid container name: "+msg))
	}
	return errs
}

// sortedKeys makes the order of errors about map entries stable.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
