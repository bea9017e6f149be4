// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationExecFree set to "true" on a PodProbeMarker makes the node service run the marker's exec
// probes, each exactly `cat <absolute path>` (see ExecFreePath), by reading the file itself, inside
// the container's root and with the container's user, instead of starting a process. The probes
// stay ordinary Kubernetes exec probes: a tool that does not know the annotation runs `cat`, with
// the same meaning. An annotation rather than a spec field, so that it survives Kruise's CRD schema.
const AnnotationExecFree = "probeshim.io/exec-free"

// ExecFreeCommand is the only program an exec-free probe may name.
const ExecFreeCommand = "cat"

// MaxExecFreePath bounds the path of an exec-free probe (PATH_MAX).
const MaxExecFreePath = 4096

// ExecFree reports whether marker opted in with AnnotationExecFree.
func ExecFree(marker metav1.Object) bool {
	return marker.GetAnnotations()[AnnotationExecFree] == "true"
}

// ExecFreePath returns the file an exec-free probe reads: probe must be an exec probe whose command
// is exactly ["cat", p] with p absolute, clean (no "." or ".." element, no trailing or doubled
// slash), not "/" and without NUL. ok is false for anything else.
func ExecFreePath(probe *corev1.Probe) (p string, ok bool) {
	if probe == nil || probe.Exec == nil || len(probe.Exec.Command) != 2 || probe.Exec.Command[0] != ExecFreeCommand {
		return "", false
	}
	p = probe.Exec.Command[1]
	if len(p) < 2 || len(p) > MaxExecFreePath || p[0] != '/' || path.Clean(p) != p {
		return "", false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == 0 {
			return "", false
		}
	}
	return p, true
}
