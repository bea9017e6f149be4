// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// v1alpha1.AnnotationCRRUnreadyAcquired is written by the ContainerRecreateRequest lifecycle
// controller: the time the pod was made not ready, from which the node counts
// unreadyGracePeriodSeconds. A user who set it could skip the grace, so it is refused on CREATE and
// immutable once set.

var crrGroupKind = v1alpha1.SchemeGroupVersion.WithKind("ContainerRecreateRequest").GroupKind()

// ContainerRecreateRequestMutator completes a ContainerRecreateRequest on CREATE from its pod, so
// that the node service needs nothing but the request: the labels the node selects on
// (crr.apps.kruise.io/pod-uid, /node-name, active=true), strategy.failurePolicy defaulted to Fail,
// and per container the preStop hook (and the ports, for a network hook) from the pod spec and the
// statusContext (containerID, restartCount) of the instance to recreate from the pod status.
//
// strategy.terminationGracePeriodSeconds is defaulted to the pod's, as OpenKruise does, so the
// request shows the grace its node will use.
//
// A pod annotated probeshim.io/crr-concurrency: Forbid gets no second active request: a new one is
// refused while another request of the pod is active (the annotation is the pod owner's opt-in).
//
// It rejects, with every reason at once: a pod that is missing, not on a node, finished or
// being deleted; containers the pod does not have or that have not started; what the shared
// validation rejects (duplicates, activeDeadlineSeconds < 3, negative durations); and preStop,
// ports or statusContext supplied by the user, which only admission may set (a user-written
// preStop would run a command the pod never declared).
type ContainerRecreateRequestMutator struct {
	// Pods reads the target pod, and the pod's active requests when it forbids concurrent ones.
	// Use an uncached reader: a cache a moment behind would copy the status context of a container
	// instance that has already been replaced, or miss a request just created.
	Pods client.Reader
	// Hold says why OpenKruise carries out requests now ("" when probeshim does; nil never).
	// While it holds, a request is admitted as sent, labelled for Kruise (see
	// v1alpha1.LabelCRRExecutor): Kruise's own webhook completes it, and probeshim's checks
	// would refuse what that webhook injects.
	Hold func() string
}

var _ admission.Handler = &ContainerRecreateRequestMutator{}

// Handle implements admission.Handler.
func (m *ContainerRecreateRequestMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	crr := &v1alpha1.ContainerRecreateRequest{}
	if err := json.Unmarshal(req.Object.Raw, crr); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding ContainerRecreateRequest: %w", err))
	}
	crr.Namespace = req.Namespace
	if m.Hold != nil {
		if why := m.Hold(); why != "" {
			return markForKruise(req.Object.Raw, why)
		}
	}

	specPath := field.NewPath("spec")
	var errs field.ErrorList
	for i := range crr.Spec.Containers {
		c := &crr.Spec.Containers[i]
		cPath := specPath.Child("containers").Index(i)
		const why = "copied from the pod by admission; leave it empty"
		if c.PreStop != nil {
			errs = append(errs, field.Forbidden(cPath.Child("preStop"), why))
		}
		if c.Ports != nil {
			errs = append(errs, field.Forbidden(cPath.Child("ports"), why))
		}
		if c.StatusContext != nil {
			errs = append(errs, field.Forbidden(cPath.Child("statusContext"), why))
		}
	}
	if _, ok := crr.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationCRRUnreadyAcquired),
			"set by probeshim when it made the pod not ready; leave it empty"))
	}
	// Shape first: the pod is not needed to see a duplicate or a negative duration.
	errs = append(errs, validation.ValidateContainerRecreateRequestSpec(&crr.Spec, "", specPath)...)

	var injected *injection
	var warnings []string
	if crr.Spec.PodName != "" {
		pod := &corev1.Pod{}
		err := m.Pods.Get(ctx, client.ObjectKey{Namespace: crr.Namespace, Name: crr.Spec.PodName}, pod)
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, field.Invalid(specPath.Child("podName"), crr.Spec.PodName,
				fmt.Sprintf("pod %s does not exist in namespace %s", crr.Spec.PodName, crr.Namespace)))
		case err != nil:
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading pod %s/%s: %w", crr.Namespace, crr.Spec.PodName, err))
		default:
			var perrs field.ErrorList
			injected, warnings, perrs = injectFromPod(crr, pod, specPath)
			errs = append(errs, perrs...)
			if len(perrs) == 0 && pod.Annotations[v1alpha1.AnnotationCRRConcurrency] == v1alpha1.CRRConcurrencyForbid {
				active, err := activeRequest(ctx, m.Pods, pod)
				if err != nil {
					return admission.Errored(http.StatusInternalServerError, err)
				}
				if active != "" {
					errs = append(errs, field.Forbidden(specPath.Child("podName"), fmt.Sprintf(
						"pod %s already has the active ContainerRecreateRequest %s and its annotation %s: %s allows one at a time; "+
							"create this one after that one completes", pod.Name, active, v1alpha1.AnnotationCRRConcurrency, v1alpha1.CRRConcurrencyForbid)))
				}
			}
		}
	}
	if len(errs) > 0 {
		return denied(apierrors.NewInvalid(crrGroupKind, objName(crr.Name, crr.GenerateName), errs))
	}

	mutated, err := applyInjection(req.Object.Raw, injected)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, mutated)
	// The patch library walks maps in random order; the operations touch disjoint paths.
	sort.SliceStable(resp.Patches, func(i, j int) bool { return resp.Patches[i].Path < resp.Patches[j].Path })
	resp.Warnings = warnings
	return resp
}

// activeRequest names an active request of pod (not completed, not being deleted), or "".
func activeRequest(ctx context.Context, r client.Reader, pod *corev1.Pod) (string, error) {
	var list v1alpha1.ContainerRecreateRequestList
	if err := r.List(ctx, &list, client.InNamespace(pod.Namespace),
		client.MatchingLabels{v1alpha1.LabelCRRPodUID: string(pod.UID), v1alpha1.LabelCRRActive: "true"}); err != nil {
		return "", fmt.Errorf("listing the requests of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for i := range list.Items {
		c := &list.Items[i]
		if c.DeletionTimestamp == nil && c.Status.Phase != v1alpha1.ContainerRecreateRequestCompleted {
			return c.Name, nil
		}
	}
	return "", nil
}

// injection is what the mutator adds to a request.
type injection struct {
	labels     map[string]string
	grace      *int64              // the pod's terminationGracePeriodSeconds, when the request sets none
	containers []injectedContainer // in spec.containers order
}

type injectedContainer struct {
	PreStop       *v1alpha1.ProbeHandler                             `json:"preStop,omitempty"`
	Ports         []corev1.ContainerPort                             `json:"ports,omitempty"`
	StatusContext *v1alpha1.ContainerRecreateRequestContainerContext `json:"statusContext"`
}

// injectFromPod checks the pod and the named containers and computes what to inject.
func injectFromPod(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod, specPath *field.Path) (*injection, []string, field.ErrorList) {
	podPath := specPath.Child("podName")
	if msg := podNotRecreatable(pod); msg != "" {
		return nil, nil, field.ErrorList{field.Invalid(podPath, crr.Spec.PodName, msg)}
	}
	var errs field.ErrorList
	var warnings []string
	inj := &injection{labels: map[string]string{
		v1alpha1.LabelCRRPodUID:   string(pod.UID),
		v1alpha1.LabelCRRNodeName: pod.Spec.NodeName,
		v1alpha1.LabelCRRActive:   "true",
	}}
	if s := crr.Spec.Strategy; s == nil || s.TerminationGracePeriodSeconds == nil {
		inj.grace = pod.Spec.TerminationGracePeriodSeconds
	}
	names := recreatableNames(pod)
	for i := range crr.Spec.Containers {
		name := crr.Spec.Containers[i].Name
		cPath := specPath.Child("containers").Index(i)
		spec, status := podContainer(pod, name)
		if spec == nil {
			errs = append(errs, field.NotSupported(cPath.Child("name"), name, names))
			continue
		}
		if status == nil || status.ContainerID == "" {
			errs = append(errs, field.Invalid(cPath.Child("name"), name,
				fmt.Sprintf("container %s of pod %s has not started yet; there is nothing to recreate", name, pod.Name)))
			continue
		}
		ic := injectedContainer{StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{
			ContainerID: status.ContainerID, RestartCount: status.RestartCount}}
		if h := preStopOf(spec); h != nil {
			switch {
			case h.Exec != nil || h.HTTPGet != nil || h.TCPSocket != nil:
				ic.PreStop = &v1alpha1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}
				// The pod's hook is checked like a probe: probeshim dials only the pod itself.
				targetErrs := validation.ValidatePodPreStop(ic.PreStop, cPath.Child("preStop"))
				for _, e := range targetErrs {
					e.Detail = fmt.Sprintf("the preStop hook of container %s in the pod cannot be run by probeshim: %s", name, e.Detail)
					errs = append(errs, e)
				}
				if len(targetErrs) == 0 && len(validation.ValidatePreStop(ic.PreStop, pod.Status.PodIP, cPath.Child("preStop"))) > 0 {
					// Too large to copy into the request, which is bounded: the node runs the pod's
					// own hook anyway, never the request's copy.
					ic.PreStop = nil
					warnings = append(warnings, fmt.Sprintf("container %s: its preStop hook is larger than a request carries; "+
						"the node runs it from the pod's spec", name))
				}
				if h.HTTPGet != nil || h.TCPSocket != nil {
					ic.Ports = spec.Ports // a hook may name a port
				}
			case h.Sleep != nil:
				warnings = append(warnings, fmt.Sprintf("container %s: its preStop sleep is not run on recreation; "+
					"use strategy.unreadyGracePeriodSeconds to let endpoints drain first", name))
			}
		}
		inj.containers = append(inj.containers, ic)
	}
	return inj, warnings, errs
}

// podNotRecreatable says why no container of pod can be recreated, or "".
func podNotRecreatable(pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return fmt.Sprintf("pod %s is being deleted", pod.Name)
	case pod.Spec.NodeName == "":
		return fmt.Sprintf("pod %s is not running on a node yet (not scheduled)", pod.Name)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return fmt.Sprintf("pod %s has finished (phase %s); its containers are not restarted", pod.Name, pod.Status.Phase)
	}
	return ""
}

// podContainer finds a container the kubelet restarts — a container or a sidecar (restartable
// init container) — and its status.
func podContainer(pod *corev1.Pod, name string) (*corev1.Container, *corev1.ContainerStatus) {
	find := func(statuses []corev1.ContainerStatus) *corev1.ContainerStatus {
		for i := range statuses {
			if statuses[i].Name == name {
				return &statuses[i]
			}
		}
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], find(pod.Status.ContainerStatuses)
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.Name == name && isSidecar(c) {
			return c, find(pod.Status.InitContainerStatuses)
		}
	}
	return nil, nil
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func recreatableNames(pod *corev1.Pod) []string {
	var out []string
	for _, pc := range probedContainers(pod) { // the same set: sidecars, then containers
		out = append(out, pc.c.Name)
	}
	return out
}

func preStopOf(c *corev1.Container) *corev1.LifecycleHandler {
	if c.Lifecycle == nil {
		return nil
	}
	return c.Lifecycle.PreStop
}

// applyInjection edits the request's JSON as sent, so the patch carries exactly the injection.
func applyInjection(raw []byte, inj *injection) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, err
	}
	meta := childObject(obj, "metadata")
	labels := childObject(meta, "labels")
	for k, v := range inj.labels {
		labels[k] = v
	}
	delete(labels, v1alpha1.LabelCRRExecutor) // probeshim executes it: only admission decides
	spec := childObject(obj, "spec")
	strategy := childObject(spec, "strategy")
	if fp, _ := strategy["failurePolicy"].(string); fp == "" {
		strategy["failurePolicy"] = string(v1alpha1.ContainerRecreateRequestFailurePolicyFail)
	}
	if _, set := strategy["terminationGracePeriodSeconds"]; !set && inj.grace != nil {
		strategy["terminationGracePeriodSeconds"] = *inj.grace
	}
	list, _ := spec["containers"].([]any)
	if len(list) != len(inj.containers) {
		return nil, fmt.Errorf("request has %d containers, computed %d", len(list), len(inj.containers))
	}
	for i, ic := range inj.containers {
		c, ok := list[i].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.containers[%d] is not an object", i)
		}
		b, err := json.Marshal(ic)
		if err != nil {
			return nil, err
		}
		var fields map[string]any
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, err
		}
		for k, v := range fields {
			c[k] = v
		}
	}
	return json.Marshal(obj)
}

// markForKruise admits a request unchanged but for the label that hands it to kruise-daemon.
func markForKruise(raw []byte, why string) admission.Response {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	childObject(childObject(obj, "metadata"), "labels")[v1alpha1.LabelCRRExecutor] = v1alpha1.CRRExecutorKruise
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(raw, mutated)
	resp.Warnings = []string{"carried out by OpenKruise, not probeshim: " + why}
	return resp
}

// childObject returns obj[key] as an object, creating it when absent or null.
func childObject(obj map[string]any, key string) map[string]any {
	if m, ok := obj[key].(map[string]any); ok {
		return m
	}
	m := map[string]any{}
	obj[key] = m
	return m
}

func objName(name, generateName string) string {
	if name != "" {
		return name
	}
	return generateName
}

// ContainerRecreateRequestValidator checks ContainerRecreateRequests after mutation. On CREATE:
// the shared validation (with the pod's IP, which a preStop Host header may name), and that the
// mutator's labels and status contexts are there and name the pod as it is — a request without
// them would never be picked up by its node, or could not tell an already restarted container
// from the one to stop. On UPDATE: the spec and the pod-uid and node-name labels are immutable,
// the active label can only be removed (it marks a request its node still works on), and the
// unready-acquired annotation cannot change once set. Status writes are not sent here.
type ContainerRecreateRequestValidator struct {
	// Pods reads the target pod; an uncached reader, as for the mutator.
	Pods client.Reader
	// Hold, as for the mutator: while it holds, requests are OpenKruise's to check.
	Hold func() string
}

var _ admission.Handler = &ContainerRecreateRequestValidator{}

// Handle implements admission.Handler.
func (v *ContainerRecreateRequestValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	crr := &v1alpha1.ContainerRecreateRequest{}
	if err := json.Unmarshal(req.Object.Raw, crr); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding ContainerRecreateRequest: %w", err))
	}
	if v.Hold != nil && v.Hold() != "" {
		return admission.Allowed("carried out by OpenKruise")
	}
	var errs field.ErrorList
	if req.Operation == admissionv1.Update {
		old := &v1alpha1.ContainerRecreateRequest{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old ContainerRecreateRequest: %w", err))
		}
		errs = ValidateContainerRecreateRequestUpdate(crr, old)
	} else {
		pod := &corev1.Pod{}
		err := v.Pods.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: crr.Spec.PodName}, pod)
		switch {
		case apierrors.IsNotFound(err):
			pod = nil
		case err != nil:
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading pod %s/%s: %w", req.Namespace, crr.Spec.PodName, err))
		}
		errs = validateAdmitted(crr, pod)
	}
	if len(errs) > 0 {
		return denied(apierrors.NewInvalid(crrGroupKind, objName(crr.Name, crr.GenerateName), errs))
	}
	return admission.Allowed("")
}

// validateAdmitted checks a mutated request on CREATE; pod is nil when it does not exist.
func validateAdmitted(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	if pod == nil {
		return field.ErrorList{field.Invalid(specPath.Child("podName"), crr.Spec.PodName,
			fmt.Sprintf("pod %s does not exist in namespace %s", crr.Spec.PodName, crr.Namespace))}
	}
	errs := validation.ValidateContainerRecreateRequestSpec(&crr.Spec, pod.Status.PodIP, specPath)
	lPath := field.NewPath("metadata", "labels")
	const unmutated = "must be set by the probeshim admission webhook (is its mutating webhook configured?)"
	for key, want := range map[string]string{
		v1alpha1.LabelCRRPodUID:   string(pod.UID),
		v1alpha1.LabelCRRNodeName: pod.Spec.NodeName,
		v1alpha1.LabelCRRActive:   "true",
	} {
		switch got, ok := crr.Labels[key]; {
		case !ok:
			errs = append(errs, field.Required(lPath.Key(key), unmutated))
		case got != want:
			errs = append(errs, field.Invalid(lPath.Key(key), got, fmt.Sprintf("must be %q, as for pod %s", want, pod.Name)))
		}
	}
	if s := crr.Spec.Strategy; s == nil || s.FailurePolicy == "" {
		errs = append(errs, field.Required(specPath.Child("strategy", "failurePolicy"), unmutated))
	}
	for i := range crr.Spec.Containers {
		if crr.Spec.Containers[i].StatusContext == nil {
			errs = append(errs, field.Required(specPath.Child("containers").Index(i).Child("statusContext"), unmutated))
		}
	}
	return errs
}

// ValidateContainerRecreateRequestUpdate checks what may change on an update of a request.
func ValidateContainerRecreateRequestUpdate(crr, old *v1alpha1.ContainerRecreateRequest) field.ErrorList {
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(crr.Spec, old.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			"the spec of a ContainerRecreateRequest cannot be changed; create a new request instead"))
	}
	lPath := field.NewPath("metadata", "labels")
	for _, key := range []string{v1alpha1.LabelCRRPodUID, v1alpha1.LabelCRRNodeName} {
		if crr.Labels[key] != old.Labels[key] {
			errs = append(errs, field.Forbidden(lPath.Key(key), "set at creation from the pod and immutable"))
		}
	}
	oldActive, wasActive := old.Labels[v1alpha1.LabelCRRActive]
	if active, isActive := crr.Labels[v1alpha1.LabelCRRActive]; isActive && active != oldActive {
		msg := "can only be removed (when the request completes), never set again"
		if wasActive {
			msg = `must stay "true" until it is removed`
		}
		errs = append(errs, field.Forbidden(lPath.Key(v1alpha1.LabelCRRActive), msg))
	}
	if _, had := old.Labels[v1alpha1.LabelCRRExecutor]; !had {
		if _, has := crr.Labels[v1alpha1.LabelCRRExecutor]; has {
			errs = append(errs, field.Forbidden(lPath.Key(v1alpha1.LabelCRRExecutor),
				"set only by admission while OpenKruise carries out requests; it can be removed (handover), not added"))
		}
	}
	if was, ok := old.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired]; ok && crr.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired] != was {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationCRRUnreadyAcquired),
			"records when the pod was made not ready and is immutable once set"))
	}
	return errs
}
