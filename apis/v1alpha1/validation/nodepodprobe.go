// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// ValidateNodePodProbe checks the spec of a NodePodProbe.
func ValidateNodePodProbe(npp *v1alpha1.NodePodProbe) field.ErrorList {
	return ValidateNodePodProbeSpec(&npp.Spec, field.NewPath("spec"))
}

// ValidateNodePodProbeSpec checks every pod entry (see ValidatePodProbe) and that no pod UID is
// listed twice.
func ValidateNodePodProbeSpec(spec *v1alpha1.NodePodProbeSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	uids := map[string]bool{}
	for i := range spec.PodProbes {
		pp := &spec.PodProbes[i]
		ppPath := fldPath.Child("podProbes").Index(i)
		errs = append(errs, ValidatePodProbe(pp, ppPath)...)
		if pp.UID != "" {
			if uids[pp.UID] {
				errs = append(errs, field.Duplicate(ppPath.Child("uid"), pp.UID))
			}
			uids[pp.UID] = true
		}
	}
	return errs
}

// ValidatePodProbe checks one pod entry of a NodePodProbe: the pod's identity, unique probe names,
// and every probe as ValidateProbe does, with the entry's IP as the pod IP. The node service calls
// it per entry, so one bad entry stops only that pod's probes.
func ValidatePodProbe(pp *v1alpha1.PodProbe, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pp.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), "the pod's name"))
	}
	if pp.Namespace == "" {
		errs = append(errs, field.Required(fldPath.Child("namespace"), "the pod's namespace"))
	}
	if pp.UID == "" {
		errs = append(errs, field.Required(fldPath.Child("uid"), "the pod's UID"))
	}
	if pp.IP != "" {
		if _, err := netip.ParseAddr(pp.IP); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("IP"), pp.IP, "must be the pod's IP address, e.g. 10.244.1.7"))
		}
	}
	opts := ProbeOptions{PodIP: pp.IP}
	names := map[string]bool{}
	for i := range pp.Probes {
		p := &pp.Probes[i]
		pPath := fldPath.Child("probes").Index(i)
		// The name is an opaque key here ("<marker>#<probe>" or one the liveness mapping chose).
		if p.Name == "" {
			errs = append(errs, field.Required(pPath.Child("name"), "a probe name, unique within the pod"))
		} else {
			if names[p.Name] {
				errs = append(errs, field.Duplicate(pPath.Child("name"), p.Name))
			}
			names[p.Name] = true
		}
		errs = append(errs, validateContainerName(p.ContainerName, pPath.Child("containerName"))...)
		errs = append(errs, ValidateProbe(&p.Probe.Probe, opts, pPath.Child("probe"))...)
		if p.ExecFree {
			errs = append(errs, ValidateExecFreeProbe(&p.Probe.Probe, pPath.Child("execFree"))...)
		}
	}
	return errs
}
