// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// execFreeForm says what an exec-free probe must look like, for error messages.
var execFreeForm = fmt.Sprintf(`exactly [%q, "<absolute path>"], e.g. [%q, "/tmp/idle"] `+
	`(a clean path of at most %d bytes: no "." or ".." element, no trailing slash)`,
	v1alpha1.ExecFreeCommand, v1alpha1.ExecFreeCommand, v1alpha1.MaxExecFreePath)

// validateExecFreeMarker checks a marker's AnnotationExecFree: "true" or "false", and with "true"
// every exec probe of the marker reads one file (see v1alpha1.ExecFreePath). Other handlers are
// not affected by the annotation.
func validateExecFreeMarker(ppm *v1alpha1.PodProbeMarker) field.ErrorList {
	v, ok := ppm.Annotations[v1alpha1.AnnotationExecFree]
	if !ok || v == "false" {
		return nil
	}
	annPath := field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationExecFree)
	if v != "true" {
		return field.ErrorList{field.NotSupported(annPath, v, []string{"true", "false"})}
	}
	var errs field.ErrorList
	for i := range ppm.Spec.Probes {
		p := &ppm.Spec.Probes[i].Probe.Probe
		if p.Exec == nil {
			continue
		}
		cmdPath := field.NewPath("spec", "probes").Index(i).Child("probe", "exec", "command")
		file, ok := v1alpha1.ExecFreePath(p)
		switch {
		case !ok:
			errs = append(errs, field.Invalid(cmdPath, p.Exec.Command,
				fmt.Sprintf("with %s: \"true\" an exec probe's command must be %s; drop the annotation to run other commands",
					v1alpha1.AnnotationExecFree, execFreeForm)))
		case underKernelFS(file):
			errs = append(errs, field.Invalid(cmdPath.Index(1), file, kernelFSDetail))
		}
	}
	return capBadValues(errs)
}

// kernelFSDetail refuses exec-free reads of /proc and /sys, which the node service refuses too
// (wherever such a file system is mounted): their files show what the reader's credentials allow.
const kernelFSDetail = "exec-free probes do not read /proc or /sys (the kernel makes their files up for each reader); " +
	"drop the annotation to run cat in the container"

func underKernelFS(file string) bool {
	for _, dir := range []string{"/proc", "/sys"} {
		if file == dir || strings.HasPrefix(file, dir+"/") {
			return true
		}
	}
	return false
}

// grandfatherKernelFS drops, on update, the refusal of a /proc or /sys path that the old object
// already read exec-free, so that a marker admitted before the rule can still be edited and
// deleted (its finalizer removed); the node service refuses the read itself.
func grandfatherKernelFS(errs field.ErrorList, oldObj *v1alpha1.PodProbeMarker) field.ErrorList {
	if !v1alpha1.ExecFree(oldObj) {
		return errs
	}
	had := map[string]bool{}
	for i := range oldObj.Spec.Probes {
		if file, ok := v1alpha1.ExecFreePath(&oldObj.Spec.Probes[i].Probe.Probe); ok {
			had[file] = true
		}
	}
	out := errs[:0:0]
	for _, e := range errs {
		if !(e.Detail == kernelFSDetail && had[fmt.Sprint(e.BadValue)]) {
			out = append(out, e)
		}
	}
	return out
}

// ValidateExecFreeProbe checks a NodePodProbe probe marked execFree: it must read one file.
func ValidateExecFreeProbe(probe *corev1.Probe, fldPath *field.Path) field.ErrorList {
	if _, ok := v1alpha1.ExecFreePath(probe); ok {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, "true", "an execFree probe must be an exec probe whose command is "+execFreeForm)}
}
