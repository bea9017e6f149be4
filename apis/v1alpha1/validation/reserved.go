// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// reservedDomains are the key prefixes whose labels, annotations and conditions drive the
// behaviour of probeshim, OpenKruise, Kubernetes or their add-ons (a pod's enhanced liveness, its
// restart records, node placement, readiness...). A PodProbeMarker turns a probe result into pod
// metadata without any access check, so letting it write these would let anyone who can create a
// marker do what those keys unlock (e.g. place an exec probe, which needs pods/exec). Each domain
// is reserved with all its subdomains ("foo.kubernetes.io/", "x.kruise.io/").
var reservedDomains = []string{"kruise.io", "probeshim.io", "kubernetes.io", "k8s.io"}

// allowedReservedKeys are the keys under a reserved domain that users legitimately set on their
// own pods and that unlock nothing beyond the pod's namespace. Exact keys only: nothing broad.
var allowedReservedKeys = []string{
	// The ReplicaSet controller's preference of which pod to delete on scale-down; OpenKruise's
	// own PodProbeMarker example sets it from an idle probe.
	"controller.kubernetes.io/pod-deletion-cost",
}

// ownedPodConditions are the pod condition types another controller owns: the kubelet's and the
// control plane's, and OpenKruise's (probeshim's ContainerRecreateRequest controller writes
// KruisePodReady). A marker writing one of them would fight its owner, or fake readiness.
var ownedPodConditions = []string{
	string(corev1.PodReady),
	string(corev1.ContainersReady),
	string(corev1.PodInitialized),
	string(corev1.PodScheduled),
	string(corev1.PodReadyToStartContainers),
	string(corev1.DisruptionTarget),
	string(corev1.PodResizePending),
	string(corev1.PodResizeInProgress),
	string(corev1.AllContainersRestarting),
	"KruisePodReady",
	"InPlaceUpdateReady",
}

// allowedConditionDomains are reserved domains whose condition types markers may write:
// kruise-game generates PodProbeMarkers whose podConditionType is game.kruise.io/<name>.
var allowedConditionDomains = []string{"game.kruise.io"}

// keyDomain is the prefix of a qualified key ("example.com" of "example.com/name"), lower-cased
// (annotation keys compare case-insensitively); "" when the key has none.
func keyDomain(key string) string {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	return strings.ToLower(prefix)
}

func inDomains(domain string, domains []string) bool {
	for _, d := range domains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// ReservedMetadataKey reports whether a marker may not set or remove the label or annotation key.
func ReservedMetadataKey(key string) bool {
	if slices.Contains(allowedReservedKeys, strings.ToLower(key)) {
		return false
	}
	return inDomains(keyDomain(key), reservedDomains)
}

// ReservedCondition reports whether a marker may not set or remove the pod condition type t.
func ReservedCondition(t string) bool {
	if slices.Contains(ownedPodConditions, t) {
		return true
	}
	d := keyDomain(t)
	return inDomains(d, reservedDomains) && !inDomains(d, allowedConditionDomains)
}

const (
	reservedKeyDetail    = "must not use a reserved prefix"
	ownedConditionDetail = "must not name a condition another controller owns"
)

func reservedKeyError(fldPath *field.Path, key string) *field.Error {
	return field.Invalid(fldPath, key, reservedKeyDetail+" ("+strings.Join(reservedDomains, ", ")+
		" and their subdomains drive probeshim, OpenKruise and Kubernetes; allowed there only: "+
		strings.Join(allowedReservedKeys, ", ")+"); use your own, e.g. example.com/"+keyName(key))
}

func reservedConditionError(fldPath *field.Path, t string) *field.Error {
	return field.Invalid(fldPath, t, ownedConditionDetail+" ("+strings.Join(ownedPodConditions, ", ")+
		", or any under "+strings.Join(reservedDomains, ", ")+" except game.kruise.io/); use your own, e.g. example.com/"+
		strings.ToLower(keyName(t)))
}

func keyName(key string) string {
	if _, name, ok := strings.Cut(key, "/"); ok {
		return name
	}
	return key
}

// validateReservedMarks rejects the reserved condition and keys a marker probe would write.
func validateReservedMarks(p *v1alpha1.PodContainerProbe, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t := p.PodConditionType; t != "" && ReservedCondition(t) {
		errs = append(errs, reservedConditionError(fldPath.Child("podConditionType"), t))
	}
	for i := range p.MarkerPolicy {
		pol := &p.MarkerPolicy[i]
		pPath := fldPath.Child("markerPolicy").Index(i)
		for _, k := range sortedKeys(pol.Labels) {
			if ReservedMetadataKey(k) {
				errs = append(errs, reservedKeyError(pPath.Child("labels").Key(k), k))
			}
		}
		for _, k := range sortedKeys(pol.Annotations) {
			if ReservedMetadataKey(k) {
				errs = append(errs, reservedKeyError(pPath.Child("annotations").Key(k), k))
			}
		}
	}
	return errs
}

// grandfatherReserved drops from errs the reserved-key and owned-condition errors of newObj that
// oldObj already had (the same probe, state and key): a marker stored before the rule still
// takes metadata-only updates (labels, owner references, finalizers) and edits of its other
// fields. The controller never writes those keys anyway; adding a reserved key is always refused.
func grandfatherReserved(errs field.ErrorList, newObj, oldObj *v1alpha1.PodProbeMarker) field.ErrorList {
	old := map[string]*v1alpha1.PodContainerProbe{}
	for i := range oldObj.Spec.Probes {
		old[oldObj.Spec.Probes[i].Name] = &oldObj.Spec.Probes[i]
	}
	had := map[string]bool{}
	probes := field.NewPath("spec", "probes")
	for i := range newObj.Spec.Probes {
		p, o := &newObj.Spec.Probes[i], old[newObj.Spec.Probes[i].Name]
		if o == nil {
			continue
		}
		if p.PodConditionType != "" && p.PodConditionType == o.PodConditionType {
			had[probes.Index(i).Child("podConditionType").String()] = true
		}
		for j := range p.MarkerPolicy {
			pol := &p.MarkerPolicy[j]
			for _, op := range o.MarkerPolicy {
				if op.State != pol.State {
					continue
				}
				pPath := probes.Index(i).Child("markerPolicy").Index(j)
				for k := range pol.Labels {
					if _, ok := op.Labels[k]; ok {
						had[pPath.Child("labels").Key(k).String()] = true
					}
				}
				for k := range pol.Annotations {
					if _, ok := op.Annotations[k]; ok {
						had[pPath.Child("annotations").Key(k).String()] = true
					}
				}
			}
		}
	}
	out := errs[:0:0]
	for _, e := range errs {
		reserved := strings.HasPrefix(e.Detail, reservedKeyDetail) || strings.HasPrefix(e.Detail, ownedConditionDetail)
		if !(reserved && had[e.Field]) {
			out = append(out, e)
		}
	}
	return out
}
