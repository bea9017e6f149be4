// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package podprobe turns this node's NodePodProbe into work for the probe
// engine and the engine's results into the NodePodProbe's status and pod
// events.
package podprobe

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/prober"
)

// Probe types for the prober_probe_* metrics.
const (
	probeTypeCustom   = "custom"
	probeTypeLiveness = "liveness"
)

// ProbeTypes are the probe types (prober.Desired.ProbeType) of the probes the controller runs:
// for the engine's prober.WithProbeTypes.
func ProbeTypes() []string { return []string{probeTypeCustom, probeTypeLiveness} }

// refusal is a probe of the spec the node service will not run.
type refusal struct {
	key    prober.Key
	pod    podMeta
	reason string
}

// podMeta identifies a pod in status and events.
type podMeta struct {
	uid, namespace, name string
}

// desiredFromSpec validates every pod entry again (the spec may have been
// written past the webhook) and returns the probes to run and those refused.
// One bad entry stops only its own probes.
func desiredFromSpec(spec *v1alpha1.NodePodProbeSpec) (run []prober.Desired, refused []refusal) {
	for i := range spec.PodProbes {
		pp := &spec.PodProbes[i]
		if pp.UID == "" {
			continue // nothing to key results on; the webhook rejects it anyway
		}
		meta := podMeta{uid: pp.UID, namespace: pp.Namespace, name: pp.Name}
		podPath := field.NewPath("spec", "podProbes").Index(i)
		podErrs := validatePodIdentity(pp, podPath)
		opts := validation.ProbeOptions{PodIP: pp.IP}
		seen := map[string]bool{}
		for j := range pp.Probes {
			p := &pp.Probes[j]
			key := prober.Key{PodUID: pp.UID, Container: p.ContainerName, Probe: p.Name}
			path := podPath.Child("probes").Index(j)
			errs := append(field.ErrorList{}, podErrs...)
			if seen[p.Name] {
				errs = append(errs, field.Duplicate(path.Child("name"), p.Name))
			}
			seen[p.Name] = true
			if p.ContainerName == "" {
				errs = append(errs, field.Required(path.Child("containerName"), "the container to probe"))
			}
			opts.Liveness = isLiveness(p.Name)
			errs = append(errs, validation.ValidateProbe(&p.Probe.Probe, opts, path.Child("probe"))...)
			var readFile string
			if p.ExecFree {
				errs = append(errs, validation.ValidateExecFreeProbe(&p.Probe.Probe, path.Child("execFree"))...)
				readFile, _ = v1alpha1.ExecFreePath(&p.Probe.Probe)
			}
			if pp.IP == "" && p.Probe.Exec == nil {
				// Nothing to dial but the pod's own address; never loopback or the node instead.
				errs = append(errs, field.Required(podPath.Child("IP"), "the pod's IP, the only address a network probe goes to"))
			}
			if len(errs) > 0 {
				refused = append(refused, refusal{key: key, pod: meta, reason: refusalMessage(errs)})
				continue
			}
			typ := probeTypeCustom
			if opts.Liveness {
				typ = probeTypeLiveness
			}
			run = append(run, prober.Desired{
				Key: key,
				Pod: prober.PodRef{UID: pp.UID, Namespace: pp.Namespace, Name: pp.Name, IP: pp.IP,
					DeclaredPortsOnly: !opts.Liveness},
				Spec:      *p.Probe.Probe.DeepCopy(),
				ProbeType: typ,
				ReadFile:  readFile,
			})
		}
	}
	return run, refused
}

func validatePodIdentity(pp *v1alpha1.PodProbe, path *field.Path) field.ErrorList {
	withoutProbes := *pp
	withoutProbes.Probes = nil
	return validation.ValidatePodProbe(&withoutProbes, path)
}

func isLiveness(probeName string) bool {
	_, ok := v1alpha1.ParseLivenessProbeName(probeName)
	return ok
}

func refusalMessage(errs field.ErrorList) string {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	msg := fmt.Sprintf("probe refused by the node service: %s", strings.Join(msgs, "; "))
	return validation.TruncateMessage(msg, validation.MaxProbeMessageBytes)
}
