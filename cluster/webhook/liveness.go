// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// annotationMirrorPod marks the API server's mirror of a static pod. The kubelet runs the static
// manifest on disk, so changing the mirror would only make it lie about what runs.
const annotationMirrorPod = corev1.MirrorPodAnnotationKey

// LivenessMutator hands the liveness probes of pods annotated
// apps.kruise.io/using-enhanced-liveness: "true" to probeshim on CREATE: each container's
// livenessProbe moves into the apps.kruise.io/container-probe-context annotation and is removed
// from the container, so the kubelet never restarts the container on its own and the liveness
// decider decides instead. "Each container" is every container the kubelet would run a liveness
// probe for, in spec order: sidecars (restartable init containers) first, then the containers,
// only those that have one.
//
// It is idempotent: a pod whose probes were already moved has none left in its containers and is
// admitted unchanged; a probe added by a later mutating webhook (reinvocation) is merged into the
// existing annotation. A probe probeshim cannot run as a liveness probe is rejected, never dropped:
// silently dropping it would leave the container without any liveness check.
//
// A moved probe that names the pod's loopback (host 127.0.0.1 or localhost) needs the requesting
// user's pods/portforward right, checked through Reviewer (see checkLoopbackLiveness).
type LivenessMutator struct {
	Reviewer AccessReviewer
	// Hold says why probeshim's probe work is held now ("" when it is not; nil never): OpenKruise
	// owns the NodePodProbes, so nothing would run a moved probe. While it holds, the pod is
	// admitted as sent, its livenessProbe left to the kubelet.
	Hold func() string
	// MaxTimeoutSeconds is the ceiling on the moved probes' timeoutSeconds (0: none).
	MaxTimeoutSeconds int32
	// ServedNodes is how a pod whose probes are moved is tied to nodes with a live node service
	// (v1alpha1.LabelNodeServed), unless the pod's v1alpha1.AnnotationServedNodeAffinity, or its
	// namespace's (read through Namespaces, when set), says otherwise: v1alpha1.ServedNodeRequire
	// ("" too), ServedNodePrefer or ServedNodeOff. The choice made is recorded in the pod's
	// annotation. A pod already bound to a node (spec.nodeName) gets no affinity: it is placed
	// where it says.
	ServedNodes string
	Namespaces  client.Reader
}

var _ admission.Handler = LivenessMutator{}

// Handle implements admission.Handler.
func (m LivenessMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding pod: %w", err))
	}
	if !v1alpha1.UsesEnhancedLiveness(pod) {
		return admission.Allowed("")
	}
	if m.Hold != nil {
		if why := m.Hold(); why != "" {
			return admission.Allowed("").WithWarnings("enhanced liveness not applied, the kubelet keeps the livenessProbe: probeshim's probes are held (" + why + ")")
		}
	}
	if _, mirror := pod.Annotations[annotationMirrorPod]; mirror {
		return admission.Allowed("mirror pod: the kubelet runs the static pod's own probes")
	}

	probes, moved, errs := livenessContext(pod, m.MaxTimeoutSeconds)
	if len(errs) > 0 {
		return denyPod(pod, req.Namespace, errs)
	}
	if len(moved) == 0 {
		return admission.Allowed("") // nothing to move, nothing to record
	}
	if resp := checkLoopbackLiveness(ctx, m.Reviewer, req, moved); resp != nil {
		return *resp
	}
	value, err := v1alpha1.FormatContainerProbeContext(probes)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if len(value) > v1alpha1.MaxContainerProbeContextBytes {
		// Every tenant's liveness probes on a node share its NodePodProbe.
		return denyPod(pod, req.Namespace, field.ErrorList{field.Invalid(
			field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationContainerProbeContext), fmt.Sprintf("%d bytes", len(value)),
			fmt.Sprintf("the pod's liveness probes take %d bytes as this annotation, over the %d a pod's enhanced liveness probes may take: use fewer or smaller probes",
				len(value), v1alpha1.MaxContainerProbeContextBytes))})
	}
	policy, warning, errs := m.servedNodePolicy(ctx, pod, req.Namespace)
	if len(errs) > 0 {
		return denyPod(pod, req.Namespace, errs)
	}
	var affinity *corev1.Affinity
	if pod.Spec.NodeName == "" {
		affinity = withServedNode(pod.Spec.Affinity, policy)
	}
	mutated, err := moveLivenessProbes(req.Object.Raw, value, moved, policy, affinity)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, mutated)
	if warning != "" {
		resp.Warnings = append(resp.Warnings, warning)
	}
	// The patch library walks maps in random order. Our operations touch disjoint paths and
	// never add or remove list elements, so sorting by path is safe and makes the response stable.
	sort.SliceStable(resp.Patches, func(i, j int) bool { return resp.Patches[i].Path < resp.Patches[j].Path })
	return resp
}

// probedContainer is a container the kubelet would run a liveness probe for, and where it is.
type probedContainer struct {
	c    *corev1.Container
	list string // "initContainers" or "containers"
	idx  int
}

// probedContainers lists the pod's sidecars (restartable init containers) and containers in
// spec order. Other init containers cannot have a liveness probe.
func probedContainers(pod *corev1.Pod) []probedContainer {
	var out []probedContainer
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, probedContainer{c, "initContainers", i})
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, probedContainer{&pod.Spec.Containers[i], "containers", i})
	}
	return out
}

// livenessContext computes the annotation entries for pod, and where the probes to remove are:
// the liveness probe of every container that has one in its spec, plus the entries an earlier
// pass already recorded for the others. It returns no entries when no container has a liveness
// probe in its spec, so such a pod stays unchanged.
func livenessContext(pod *corev1.Pod, maxTimeout int32) ([]v1alpha1.ContainerLivenessProbe, []probedContainer, field.ErrorList) {
	annPath := field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationContainerProbeContext)
	containers := probedContainers(pod)
	var errs field.ErrorList

	recorded := map[string]v1alpha1.ContainerLivenessProbe{}
	if value, ok := pod.Annotations[v1alpha1.AnnotationContainerProbeContext]; ok {
		existing, err := v1alpha1.ParseContainerProbeContext(value)
		if err != nil {
			return nil, nil, field.ErrorList{field.Invalid(annPath, value, "must be a JSON list of {name, livenessProbe}: "+err.Error())}
		}
		errs = append(errs, validation.ValidateContainerProbeContext(existing, annPath)...)
		names := map[string]bool{}
		for _, pc := range containers {
			names[pc.c.Name] = true
		}
		for i, p := range existing {
			if p.Name != "" && !names[p.Name] {
				errs = append(errs, field.NotFound(annPath.Index(i).Child("name"), p.Name))
			}
			errs = append(errs, validation.ValidateTimeoutCeiling(&p.LivenessProbe, maxTimeout, annPath.Index(i).Child("livenessProbe"))...)
			recorded[p.Name] = p
		}
	}

	var probes []v1alpha1.ContainerLivenessProbe
	var moved []probedContainer
	for _, pc := range containers {
		switch {
		case pc.c.LivenessProbe != nil:
			// The pod IP is not known at CREATE; the shared validation then accepts loopback Host
			// headers only, which is what a probe dialled inside the pod's netns can reach anyway.
			path := field.NewPath("spec", pc.list).Index(pc.idx).Child("livenessProbe")
			errs = append(errs, validation.ValidateProbe(pc.c.LivenessProbe, validation.ProbeOptions{Liveness: true}, path)...)
			errs = append(errs, validation.ValidateTimeoutCeiling(pc.c.LivenessProbe, maxTimeout, path)...)
			probes = append(probes, v1alpha1.ContainerLivenessProbe{Name: pc.c.Name, LivenessProbe: *pc.c.LivenessProbe})
			moved = append(moved, pc)
		case recorded[pc.c.Name].Name != "":
			probes = append(probes, recorded[pc.c.Name])
		}
	}
	if len(errs) > 0 || len(moved) == 0 {
		return nil, nil, errs
	}
	return probes, moved, nil
}

// servedNodePolicies are the values of v1alpha1.AnnotationServedNodeAffinity.
var servedNodePolicies = []string{v1alpha1.ServedNodeRequire, v1alpha1.ServedNodePrefer, v1alpha1.ServedNodeOff}

// servedNodePolicy is how pod is tied to served nodes: its annotation, else its namespace's, else
// m's default. A namespace's value that is not one of servedNodePolicies, or a namespace that
// cannot be read, leaves the default, with a warning.
func (m LivenessMutator) servedNodePolicy(ctx context.Context, pod *corev1.Pod, namespace string) (string, string, field.ErrorList) {
	if policy, set := pod.Annotations[v1alpha1.AnnotationServedNodeAffinity]; set {
		if !slices.Contains(servedNodePolicies, policy) {
			return "", "", field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationServedNodeAffinity),
				policy, servedNodePolicies)}
		}
		return policy, "", nil
	}
	policy := cmp.Or(m.ServedNodes, v1alpha1.ServedNodeRequire)
	if m.Namespaces == nil {
		return policy, "", nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := m.Namespaces.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return policy, fmt.Sprintf("namespace %s could not be read for its %s (%v): the cluster's default %s applies",
			namespace, v1alpha1.AnnotationServedNodeAffinity, err, policy), nil
	}
	v, set := ns.Annotations[v1alpha1.AnnotationServedNodeAffinity]
	switch {
	case !set:
		return policy, "", nil
	case !slices.Contains(servedNodePolicies, v):
		return policy, fmt.Sprintf("namespace %s has %s=%q, which is not one of %v: the cluster's default %s applies",
			namespace, v1alpha1.AnnotationServedNodeAffinity, v, servedNodePolicies, policy), nil
	}
	return v, "", nil
}

// servedNode is the node selector requirement of a node with a live node service.
var servedNode = corev1.NodeSelectorRequirement{Key: v1alpha1.LabelNodeServed, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}

// withServedNode returns a copy of a with the served-node requirement policy asks for: added to
// every required term (each is ORed with the others, so each must require it), or as a preferred
// term; nil when there is nothing to add.
func withServedNode(a *corev1.Affinity, policy string) *corev1.Affinity {
	if policy == v1alpha1.ServedNodeOff {
		return nil
	}
	a = a.DeepCopy()
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := a.NodeAffinity
	has := func(t corev1.NodeSelectorTerm) bool {
		for _, e := range t.MatchExpressions {
			if e.Key == servedNode.Key && e.Operator == servedNode.Operator && len(e.Values) == 1 && e.Values[0] == "true" {
				return true
			}
		}
		return false
	}
	if policy == v1alpha1.ServedNodePrefer {
		for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			if has(p.Preference) {
				return nil
			}
		}
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{servedNode}}})
		return a
	}
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	changed := false
	for i := range terms {
		if !has(terms[i]) {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, servedNode)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return a
}

// moveLivenessProbes writes the probe context annotation and the served-node policy into raw,
// removes the moved probes from their containers and, when affinity is not nil, sets it. It edits
// the pod's JSON as sent, not a re-encoding of the typed pod, so the patch carries exactly our
// change and nothing the typed round trip would add or drop (the affinity, when set, is replaced
// whole: it is ours to extend).
func moveLivenessProbes(raw []byte, annotation string, moved []probedContainer, policy string, affinity *corev1.Affinity) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("pod has no metadata object")
	}
	ann, ok := meta["annotations"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("pod has no annotations object")
	}
	ann[v1alpha1.AnnotationContainerProbeContext] = annotation
	ann[v1alpha1.AnnotationServedNodeAffinity] = policy
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("pod has no spec object")
	}
	if affinity != nil {
		b, err := json.Marshal(affinity)
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		spec["affinity"] = v
	}
	for _, pc := range moved {
		list, _ := spec[pc.list].([]any)
		if pc.idx >= len(list) {
			return nil, fmt.Errorf("pod has no %s[%d]", pc.list, pc.idx)
		}
		c, ok := list[pc.idx].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("pod's %s[%d] is not an object", pc.list, pc.idx)
		}
		delete(c, "livenessProbe")
	}
	return json.Marshal(obj)
}

// denyPod rejects an opted-in pod whose probes cannot be handed over, as an Invalid status with
// field causes, and says why these fields matter for this pod.
func denyPod(pod *corev1.Pod, namespace string, errs field.ErrorList) admission.Response {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	msgs := make([]string, 0, len(errs))
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Message: e.ErrorBody(), Field: e.Field})
	}
	msg := fmt.Sprintf("pod %s/%s has %s: %q, but its liveness probes cannot be handed to probeshim: %s",
		namespace, name, v1alpha1.AnnotationUsingEnhancedLiveness, "true", strings.Join(msgs, "; "))
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusUnprocessableEntity,
			Reason:  metav1.StatusReasonInvalid,
			Message: msg,
			Details: &metav1.StatusDetails{Name: name, Kind: "Pod", Causes: causes},
		},
	}}
}
