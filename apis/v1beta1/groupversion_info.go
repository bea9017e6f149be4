// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

var (
	// SchemeGroupVersion is the group and version of every type in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: v1alpha1.GroupName, Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion} //nolint:staticcheck // SA1019: as apis/v1alpha1

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
