// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1beta1

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// The PreRecreateGrace condition a v1alpha1 request's unready-acquired annotation becomes.
const (
	graceReason  = "PodMadeUnready"
	graceMessage = "the pod was made not ready for strategy.unreadyGracePeriodSeconds"
)

// AnnotationConditions keeps, on the stored v1alpha1 object, the v1beta1 conditions that
// v1alpha1 has no place for (any but PreRecreateGrace, or PreRecreateGrace with a reason or
// message of its own), so that a v1beta1 client reads back what it wrote. Only the conversion
// writes it; v1beta1 objects never carry it.
const AnnotationConditions = "probeshim.io/v1beta1-conditions"

// The conversion is lossless both ways: what one version has no field for travels in an
// annotation of the other (the API server lets a conversion change only labels and annotations of
// the metadata), and a value that does not parse stays in its annotation untouched.

// ConvertTo converts this request to the hub version (v1alpha1).
func (r *ContainerRecreateRequest) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*v1alpha1.ContainerRecreateRequest)
	if !ok {
		return fmt.Errorf("converting ContainerRecreateRequest to %T: not the hub version", hub)
	}
	dst.ObjectMeta = *r.ObjectMeta.DeepCopy()
	r.Spec.DeepCopyInto(&dst.Spec)
	in := r.Status.DeepCopy()
	dst.Status = v1alpha1.ContainerRecreateRequestStatus{
		Phase: in.Phase, CompletionTime: in.CompletionTime, Message: in.Message, ContainerRecreateStates: in.ContainerRecreateStates,
	}

	for _, c := range in.Conditions {
		if c.Type != ConditionPreRecreateGrace || c.Status != metav1.ConditionTrue {
			continue
		}
		// An annotation kept beside the condition (finer than a second, see ConvertFrom) is the
		// exact time, as long as the condition still says the same second.
		if at, err := time.Parse(time.RFC3339, dst.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired]); err != nil || !at.Truncate(time.Second).Equal(c.LastTransitionTime.Time) {
			setAnnotation(&dst.ObjectMeta, v1alpha1.AnnotationCRRUnreadyAcquired, c.LastTransitionTime.UTC().Format(time.RFC3339))
		}
	}
	kept := in.Conditions
	if len(kept) == 1 && isCanonicalGrace(kept[0]) {
		kept = nil // the annotation says it all
	}
	if err := setJSONAnnotation(&dst.ObjectMeta, AnnotationConditions, kept); err != nil {
		return err
	}
	if len(in.ContainerStatusSnapshot) > 0 {
		return setJSONAnnotation(&dst.ObjectMeta, v1alpha1.AnnotationCRRSyncContainerStatuses, in.ContainerStatusSnapshot)
	}
	return nil
}

// ConvertFrom converts the hub version (v1alpha1) to this version.
func (r *ContainerRecreateRequest) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*v1alpha1.ContainerRecreateRequest)
	if !ok {
		return fmt.Errorf("converting ContainerRecreateRequest from %T: not the hub version", hub)
	}
	r.ObjectMeta = *src.ObjectMeta.DeepCopy()
	src.Spec.DeepCopyInto(&r.Spec)
	in := src.Status.DeepCopy()
	r.Status = ContainerRecreateRequestStatus{
		Phase: in.Phase, CompletionTime: in.CompletionTime, Message: in.Message, ContainerRecreateStates: in.ContainerRecreateStates,
	}

	a := r.Annotations
	if v, ok := a[AnnotationConditions]; ok {
		if err := json.Unmarshal([]byte(v), &r.Status.Conditions); err == nil {
			delete(a, AnnotationConditions)
		}
	}
	// The annotation is v1alpha1's truth (probeshim's controllers write it): it replaces a
	// PreRecreateGrace condition kept from an earlier v1beta1 write, and its absence removes one.
	// The controller stamps the time to the nanosecond and a condition holds whole seconds: a time
	// the condition cannot hold exactly stays an annotation beside it, so that a v1beta1 client's
	// read-modify-write does not change it (it is immutable once set). An unparsable one stays alone.
	stamp := a[v1alpha1.AnnotationCRRUnreadyAcquired]
	acquired, err := time.Parse(time.RFC3339, stamp)
	hasGrace := err == nil
	if hasGrace && acquired.UTC().Format(time.RFC3339) == stamp {
		delete(a, v1alpha1.AnnotationCRRUnreadyAcquired)
	}
	r.Status.Conditions = withGrace(r.Status.Conditions, hasGrace, acquired.Truncate(time.Second))
	if v, ok := a[v1alpha1.AnnotationCRRSyncContainerStatuses]; ok {
		if err := json.Unmarshal([]byte(v), &r.Status.ContainerStatusSnapshot); err == nil {
			delete(a, v1alpha1.AnnotationCRRSyncContainerStatuses)
		} else {
			r.Status.ContainerStatusSnapshot = nil
		}
	}
	if len(a) == 0 {
		r.Annotations = nil
	}
	return nil
}

// withGrace returns conds with the PreRecreateGrace condition the annotation describes, in its
// place: a kept True condition at the same time stays as it was (its own reason and message), any
// other is replaced; without the annotation a True one is dropped.
func withGrace(conds []metav1.Condition, has bool, at time.Time) []metav1.Condition {
	canonical := metav1.Condition{Type: ConditionPreRecreateGrace, Status: metav1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(at), Reason: graceReason, Message: graceMessage}
	out := conds[:0:0]
	found := false
	for _, c := range conds {
		if c.Type == ConditionPreRecreateGrace && (has || c.Status == metav1.ConditionTrue) {
			if !has || found {
				continue
			}
			found = true
			if c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Time.Equal(at) {
				c = canonical
			}
		}
		out = append(out, c)
	}
	if has && !found {
		out = append(out, canonical)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// isCanonicalGrace: c is the condition ConvertFrom makes of the annotation alone.
func isCanonicalGrace(c metav1.Condition) bool {
	return c.Type == ConditionPreRecreateGrace && c.Status == metav1.ConditionTrue && c.Reason == graceReason &&
		c.Message == graceMessage && c.ObservedGeneration == 0
}

func setAnnotation(m *metav1.ObjectMeta, key, value string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
}

// setJSONAnnotation sets key to v as JSON, or removes it when v is empty.
func setJSONAnnotation[T any](m *metav1.ObjectMeta, key string, v []T) error {
	if len(v) == 0 {
		delete(m.Annotations, key)
		if len(m.Annotations) == 0 {
			m.Annotations = nil
		}
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("converting ContainerRecreateRequest: %s: %w", key, err)
	}
	setAnnotation(m, key, string(b))
	return nil
}
