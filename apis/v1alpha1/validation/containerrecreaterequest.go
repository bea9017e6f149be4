// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// MinActiveDeadlineSeconds is the shortest activeDeadlineSeconds accepted: a shorter deadline runs
// out before a node can even see the request, run preStop and stop the container.
const MinActiveDeadlineSeconds = 3

// ValidateContainerRecreateRequest checks the spec of a ContainerRecreateRequest. podIP is the IP of
// the target pod, which a preStop httpGet Host header may name; pass "" when it is not known.
func ValidateContainerRecreateRequest(crr *v1alpha1.ContainerRecreateRequest, podIP string) field.ErrorList {
	return ValidateContainerRecreateRequestSpec(&crr.Spec, podIP, field.NewPath("spec"))
}

// ValidateContainerRecreateRequestSpec checks the pod name, that the containers are listed once
// each with a valid preStop, ports and status context, and that no duration is negative.
func ValidateContainerRecreateRequestSpec(spec *v1alpha1.ContainerRecreateRequestSpec, podIP string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.PodName == "" {
		errs = append(errs, field.Required(fldPath.Child("podName"), "the name of the pod whose containers to recreate"))
	}
	cPath := fldPath.Child("containers")
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(cPath, "list at least one container to recreate"))
	}
	seen := map[string]bool{}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		iPath := cPath.Index(i)
		errs = append(errs, validateContainerName(c.Name, iPath.Child("name"))...)
		if c.Name != "" {
			if seen[c.Name] {
				errs = append(errs, field.Duplicate(iPath.Child("name"), c.Name))
			}
			seen[c.Name] = true
		}
		if c.PreStop != nil {
			errs = append(errs, ValidatePreStop(c.PreStop, podIP, iPath.Child("preStop"))...)
		}
		errs = append(errs, validateContainerPorts(c.Ports, iPath.Child("ports"))...)
		if sc := c.StatusContext; sc != nil {
			scPath := iPath.Child("statusContext")
			if id := sc.ContainerID; id != "" {
				if runtime, rest, ok := strings.Cut(id, "://"); !ok || runtime == "" || rest == "" {
					errs = append(errs, field.Invalid(scPath.Child("containerID"), id,
						"must be <runtime>://<id> as in the pod status, e.g. containerd://4f1c..."))
				}
			}
			errs = append(errs, nonNegative(int64(sc.RestartCount), scPath.Child("restartCount"))...)
		}
	}

	if s := spec.Strategy; s != nil {
		sPath := fldPath.Child("strategy")
		switch s.FailurePolicy {
		case "", v1alpha1.ContainerRecreateRequestFailurePolicyFail, v1alpha1.ContainerRecreateRequestFailurePolicyIgnore:
		default:
			errs = append(errs, field.NotSupported(sPath.Child("failurePolicy"), s.FailurePolicy,
				[]v1alpha1.ContainerRecreateRequestFailurePolicyType{
					v1alpha1.ContainerRecreateRequestFailurePolicyFail, v1alpha1.ContainerRecreateRequestFailurePolicyIgnore}))
		}
		if s.TerminationGracePeriodSeconds != nil {
			errs = append(errs, validateSeconds(*s.TerminationGracePeriodSeconds, sPath.Child("terminationGracePeriodSeconds"))...)
		}
		if s.UnreadyGracePeriodSeconds != nil {
			errs = append(errs, validateSeconds(*s.UnreadyGracePeriodSeconds, sPath.Child("unreadyGracePeriodSeconds"))...)
		}
		errs = append(errs, nonNegative(int64(s.MinStartedSeconds), sPath.Child("minStartedSeconds"))...)
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d < MinActiveDeadlineSeconds {
		errs = append(errs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *d,
			"must be at least 3 seconds; leave it unset for no deadline"))
	} else if d != nil {
		errs = append(errs, validateSeconds(*d, fldPath.Child("activeDeadlineSeconds"))...)
	}
	if t := spec.TTLSecondsAfterFinished; t != nil {
		errs = append(errs, nonNegative(int64(*t), fldPath.Child("ttlSecondsAfterFinished"))...)
	}
	return errs
}

// ValidatePreStop checks a preStop hook the node service is to run: exactly one of exec, httpGet
// or tcpSocket, with the same target rules as a probe (no host but the pod's loopback; a Host header
// may name any host, it only sets the header). podIP is unused: nothing depends on it any more.
func ValidatePreStop(h *v1alpha1.ProbeHandler, podIP string, fldPath *field.Path) field.ErrorList {
	ph := corev1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}
	if ph.Exec == nil && ph.HTTPGet == nil && ph.TCPSocket == nil {
		return field.ErrorList{field.Required(fldPath, "exactly one of exec, httpGet or tcpSocket must be set; omit preStop for none")}
	}
	return append(validateHandler(&ph, fldPath), refuseHookProtocol(ph.HTTPGet, fldPath)...)
}

// ValidatePodPreStop checks a pod's own preStop hook the node service is to run: what
// ValidatePreStop checks but its size. The bounds are for the copy a request carries into a
// per-node object; the pod's spec is bounded by the API server, and the kubelet runs any hook it
// holds, so a hook too large to copy is still run, from the pod.
func ValidatePodPreStop(h *v1alpha1.ProbeHandler, fldPath *field.Path) field.ErrorList {
	ph := corev1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}
	if ph.Exec == nil && ph.HTTPGet == nil && ph.TCPSocket == nil {
		return field.ErrorList{field.Required(fldPath, "exactly one of exec, httpGet or tcpSocket must be set; omit preStop for none")}
	}
	return capBadValues(append(validateHandlerTargets(&ph, fldPath), refuseHookProtocol(ph.HTTPGet, fldPath)...))
}

var supportedProtocols = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}

func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, p := range ports {
		pPath := fldPath.Index(i)
		if len(utilvalidation.IsValidPortNum(int(p.ContainerPort))) > 0 {
			errs = append(errs, field.Invalid(pPath.Child("containerPort"), p.ContainerPort, "must be between 1 and 65535, inclusive"))
		}
		if p.Name != "" {
			for _, msg := range utilvalidation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(pPath.Child("name"), p.Name, msg))
			}
		}
		if p.Protocol != "" && !slices.Contains(supportedProtocols, p.Protocol) {
			errs = append(errs, field.NotSupported(pPath.Child("protocol"), p.Protocol, supportedProtocols))
		}
	}
	return errs
}
