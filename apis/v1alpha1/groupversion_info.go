// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupName is the OpenKruise API group; keeping it is what makes existing manifests work.
const GroupName = "apps.kruise.io"

var (
	// SchemeGroupVersion is the group and version of every type in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion} //nolint:staticcheck // SA1019: kubebuilder's layout; dropping controller-runtime from apis/ is a change of its own

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource qualifies a plural resource name (e.g. "nodepodprobes") with this group, as
// apierrors.NewNotFound and friends expect.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}
