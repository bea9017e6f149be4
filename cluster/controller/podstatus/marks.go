// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podstatus

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// RecordAnnotation on a pod lists the label keys, annotation keys and condition types probeshim
// set on it from PodProbeMarkers, as JSON {"labels":[...],"annotations":[...],"conditions":[...]}
// (sorted, empty lists left out; the annotation is removed when all are empty). When a probe or
// its marker goes away, exactly these are removed, so labels and annotations the user set
// themselves are never touched. While a probe is live, the keys its markerPolicy names are the
// marker's: set in the matching state, removed in the other (as OpenKruise does).
const RecordAnnotation = "probeshim.io/marker-keys"

// record is the value of RecordAnnotation.
type record struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
	Conditions  []string `json:"conditions,omitempty"`
}

// parseRecord reads the pod's record; a missing or unreadable one is empty (and rewritten).
func parseRecord(pod *corev1.Pod) record {
	var r record
	if v, ok := pod.Annotations[RecordAnnotation]; ok {
		if json.Unmarshal([]byte(v), &r) != nil {
			return record{}
		}
	}
	return r
}

func (r record) empty() bool {
	return len(r.Labels) == 0 && len(r.Annotations) == 0 && len(r.Conditions) == 0
}

func (r record) equal(o record) bool {
	return slices.Equal(r.Labels, o.Labels) && slices.Equal(r.Annotations, o.Annotations) && slices.Equal(r.Conditions, o.Conditions)
}

// result is the current state of one marker probe on a pod.
type result struct {
	name  string // "<marker>#<probe>"; results apply in this order
	probe *v1alpha1.PodContainerProbe
	state v1alpha1.ContainerProbeState // what the condition says
	marks v1alpha1.ProbeState          // what the markerPolicy follows
}

// silence makes the result Unknown because the node service of node is silent since since: the
// condition says so (its transition is the silence's start, so it does not change while the
// silence lasts), and the markerPolicy follows the last result only when the marker keeps marks.
func (r *result) silence(node string, since time.Time, keepMarks bool) {
	last := r.state.State
	r.state.State = v1alpha1.ProbeUnknown
	r.state.Message = v1alpha1.SilentMessage(node, since)
	if last != "" {
		r.state.Message += "; last result " + string(last)
	}
	if !since.IsZero() {
		r.state.LastTransitionTime = metav1.NewTime(since)
	}
	if !keepMarks {
		r.marks = v1alpha1.ProbeUnknown
	}
}

// marks is what the live probes of a pod want on it.
type marks struct {
	labels, annotations         map[string]string // to set
	dropLabels, dropAnnotations map[string]bool   // to remove: the other state's keys
	conditions                  map[corev1.PodConditionType]corev1.PodCondition
}

// wanted combines results into marks. Where two probes disagree the outcome is still
// deterministic: a value to set beats a removal, the first result (by name) sets a key or a
// condition, later ones do not.
func wanted(results []result) marks {
	m := marks{
		labels: map[string]string{}, annotations: map[string]string{},
		dropLabels: map[string]bool{}, dropAnnotations: map[string]bool{},
		conditions: map[corev1.PodConditionType]corev1.PodCondition{},
	}
	sort.SliceStable(results, func(i, j int) bool { return results[i].name < results[j].name })
	for _, r := range results {
		status, ok := conditionStatus(r.state.State)
		if !ok {
			continue // no state yet
		}
		if t := corev1.PodConditionType(r.probe.PodConditionType); t != "" && !validation.ReservedCondition(string(t)) {
			if _, taken := m.conditions[t]; !taken {
				m.conditions[t] = condition(t, status, &r.state)
			}
		}
		for i := range r.probe.MarkerPolicy {
			pol := &r.probe.MarkerPolicy[i]
			if pol.State == r.marks {
				for k, v := range pol.Labels {
					if _, taken := m.labels[k]; !taken && validLabel(k, v) {
						m.labels[k] = v
					}
				}
				for k, v := range pol.Annotations {
					if _, taken := m.annotations[k]; !taken && validAnnotation(k) {
						m.annotations[k] = v
					}
				}
			} else { // the other state, or both when Unknown
				for k := range pol.Labels {
					if !validation.ReservedMetadataKey(k) {
						m.dropLabels[k] = true
					}
				}
				for k := range pol.Annotations {
					if !validation.ReservedMetadataKey(k) {
						m.dropAnnotations[k] = true
					}
				}
			}
		}
	}
	return m
}

// conditionStatus maps a probe state to a condition status; Unknown stays Unknown, never False.
func conditionStatus(s v1alpha1.ProbeState) (corev1.ConditionStatus, bool) {
	switch s {
	case v1alpha1.ProbeSucceeded:
		return corev1.ConditionTrue, true
	case v1alpha1.ProbeFailed:
		return corev1.ConditionFalse, true
	case v1alpha1.ProbeUnknown:
		return corev1.ConditionUnknown, true
	}
	return "", false
}

// condition is a marker probe's pod condition. One Unknown because the probe could not run has the
// reason its message begins with (v1alpha1.ProbeErrorMessage); every other has none, as
// OpenKruise's conditions have none. Only an Unknown's message is the node service's own: a
// Succeeded or Failed one is the probe's output, never read for a reason.
func condition(t corev1.PodConditionType, status corev1.ConditionStatus, s *v1alpha1.ContainerProbeState) corev1.PodCondition {
	transition := s.LastTransitionTime
	if transition.IsZero() {
		transition = s.LastProbeTime
	}
	var reason string
	if s.State == v1alpha1.ProbeUnknown {
		reason, _, _ = v1alpha1.ParseProbeError(s.Message)
	}
	// The node caps its messages; a status written by anyone else is capped here too.
	return corev1.PodCondition{Type: t, Status: status, Reason: reason,
		Message:       validation.TruncateMessage(s.Message, validation.MaxProbeMessageBytes),
		LastProbeTime: s.LastProbeTime, LastTransitionTime: transition}
}

// validLabel guards against a policy that slipped past validation: one bad label would make
// every metadata patch of the pod fail, and a reserved one (a marker stored before the rule, or
// written while the webhook was away) would drive what that key drives.
func validLabel(k, v string) bool {
	return !validation.ReservedMetadataKey(k) && len(utilvalidation.IsQualifiedName(k)) == 0 && len(utilvalidation.IsValidLabelValue(v)) == 0
}

func validAnnotation(k string) bool {
	// Annotation keys are qualified names compared case-insensitively.
	return !validation.ReservedMetadataKey(k) && len(utilvalidation.IsQualifiedName(strings.ToLower(k))) == 0
}

// change is what must be written to a pod to carry its marks.
type change struct {
	labels, annotations map[string]*string // nil removes the key
	setConditions       []corev1.PodCondition
	removeConditions    []corev1.PodConditionType
}

func (c *change) empty() bool {
	return len(c.labels) == 0 && len(c.annotations) == 0 && len(c.setConditions) == 0 && len(c.removeConditions) == 0
}

// plan compares pod with its marks and returns the change, with the pod's new record.
//
// The record is written before the conditions (metadata patch first, status patch second), so
// it always covers every condition probeshim set: a condition being removed stays in the record
// until a later plan sees it gone from the pod.
func plan(pod *corev1.Pod, m marks) change {
	rec := parseRecord(pod)
	c := change{labels: map[string]*string{}, annotations: map[string]*string{}}

	diffMap(pod.Labels, m.labels, m.dropLabels, rec.Labels, c.labels)
	diffMap(pod.Annotations, m.annotations, m.dropAnnotations, rec.Annotations, c.annotations)

	present := map[corev1.PodConditionType]*corev1.PodCondition{}
	for i := range pod.Status.Conditions {
		present[pod.Status.Conditions[i].Type] = &pod.Status.Conditions[i]
	}
	for _, t := range slices.Sorted(maps.Keys(m.conditions)) {
		want := m.conditions[t]
		if have := present[t]; have == nil || !sameCondition(have, &want) {
			c.setConditions = append(c.setConditions, want)
		}
	}
	conds := slices.Collect(maps.Keys(m.conditions))
	for _, s := range rec.Conditions {
		t := corev1.PodConditionType(s)
		if _, wantIt := m.conditions[t]; wantIt || present[t] == nil || validation.ReservedCondition(s) {
			continue // a record naming Ready or another controller's gate was not written by us
		}
		c.removeConditions = append(c.removeConditions, t)
		conds = append(conds, t) // recorded until seen gone
	}

	next := record{
		Labels:      slices.Sorted(maps.Keys(m.labels)),
		Annotations: slices.Sorted(maps.Keys(m.annotations)),
	}
	for _, t := range conds {
		next.Conditions = append(next.Conditions, string(t))
	}
	slices.Sort(next.Conditions)
	next.Conditions = slices.Compact(next.Conditions)
	_, hasRecord := pod.Annotations[RecordAnnotation]
	switch {
	case next.empty() && hasRecord:
		c.annotations[RecordAnnotation] = nil
	case !next.empty() && (!hasRecord || !next.equal(rec)):
		b, _ := json.Marshal(next) // cannot fail: strings only
		s := string(b)
		c.annotations[RecordAnnotation] = &s
	}
	return c
}

// diffMap fills out with the keys of cur to set (want) or remove (recorded or dropped, and not
// wanted).
func diffMap(cur, want map[string]string, drop map[string]bool, recorded []string, out map[string]*string) {
	for k, v := range want {
		if have, ok := cur[k]; !ok || have != v {
			out[k] = &v
		}
	}
	remove := func(k string) {
		if _, wanted := want[k]; wanted || validation.ReservedMetadataKey(k) {
			return // never a key another controller or the user's own tooling owns
		}
		if _, ok := cur[k]; ok {
			out[k] = nil
		}
	}
	for k := range drop {
		remove(k)
	}
	for _, k := range recorded {
		remove(k)
	}
}

// sameCondition compares what a probe result determines. lastProbeTime alone does not count:
// the node service refreshes it about once a minute, and copying every refresh to every pod
// would be a steady stream of writes that tells nobody anything; it is written along with any
// real change.
func sameCondition(have, want *corev1.PodCondition) bool {
	return have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message &&
		have.LastTransitionTime.Equal(&want.LastTransitionTime)
}

// metadataPatch is a JSON merge patch of the labels and annotations that change, with the pod's
// UID as a precondition so a pod recreated under the same name is never patched. nil when there
// is nothing to write.
func (c *change) metadataPatch(uid string) []byte {
	if len(c.labels) == 0 && len(c.annotations) == 0 {
		return nil
	}
	meta := map[string]any{"uid": uid}
	if len(c.labels) > 0 {
		meta["labels"] = c.labels
	}
	if len(c.annotations) > 0 {
		meta["annotations"] = c.annotations
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return b
}

// statusPatch is a strategic merge patch of status.conditions (merged by type: other conditions
// are left alone, and no resourceVersion is needed, so it never conflicts with the kubelet),
// with the pod's UID as a precondition. nil when there is nothing to write.
func (c *change) statusPatch(uid string) []byte {
	if len(c.setConditions) == 0 && len(c.removeConditions) == 0 {
		return nil
	}
	conds := make([]map[string]any, 0, len(c.setConditions)+len(c.removeConditions))
	for i := range c.setConditions {
		sc := &c.setConditions[i]
		conds = append(conds, map[string]any{
			"type":               sc.Type,
			"status":             sc.Status,
			"reason":             nullIfEmpty(sc.Reason),  // null clears an old reason
			"message":            nullIfEmpty(sc.Message), // null clears an old message
			"lastProbeTime":      timeOrNull(sc.LastProbeTime),
			"lastTransitionTime": timeOrNull(sc.LastTransitionTime),
		})
	}
	for _, t := range c.removeConditions {
		conds = append(conds, map[string]any{"type": t, "$patch": "delete"})
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid}, "status": map[string]any{"conditions": conds}})
	return b
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func timeOrNull(t metav1.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
