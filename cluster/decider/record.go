// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Annotations and labels of the decider. They are probeshim's own: OpenKruise never published a
// decider, so there is nothing to be compatible with.
const (
	// AnnotationRestartDisabled set to "true" on a pod (the emergency switch) or on a namespace
	// (the opt-out) holds every liveness restart of it. Probing and reporting go on.
	AnnotationRestartDisabled = "probeshim.io/liveness-restart-disabled"
	// AnnotationRestarts on a pod is the decider's record of it (Record, as JSON): which
	// failure of each container it acted on, how often and when it restarted it, and the
	// request in flight. It outlives the decider's restarts and leader changes, so a failure is
	// acted on once and the backoff keeps growing.
	AnnotationRestarts = "probeshim.io/liveness-restarts"
	// LabelCreatedBy marks the ContainerRecreateRequests the decider created (value
	// ControllerName): the ones it deletes when they finish.
	LabelCreatedBy = "probeshim.io/created-by"
)

// Record is the value of AnnotationRestarts.
type Record struct {
	Containers map[string]ContainerRecord `json:"containers,omitempty"`
	// Request is the ContainerRecreateRequest created for the last decision, until the decider
	// saw it finish.
	Request string `json:"request,omitempty"`
	// Requested is when Request was decided: a request missing soon after was never created
	// (the decider stopped in between), one missing later was finished and deleted.
	Requested *metav1.MicroTime `json:"requested,omitempty"`
}

// ContainerRecord is what the decider did to one container.
type ContainerRecord struct {
	// Failure is the Since of the failure acted on last (the liveness state's
	// lastTransitionTime); a Failed state that is not newer is the same failure.
	Failure metav1.Time `json:"failure"`
	// Restarts counts the restarts since the last backoff reset.
	Restarts int `json:"restarts"`
	// LastRestart is when the last restart was decided (to the microsecond: the backoff is
	// counted from it).
	LastRestart metav1.MicroTime `json:"lastRestart"`
}

// ParseRecord decodes the annotation; an unreadable record is an error and counts as empty.
func ParseRecord(annotations map[string]string) (Record, error) {
	var r Record
	v, ok := annotations[AnnotationRestarts]
	if !ok {
		return r, nil
	}
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", AnnotationRestarts, err)
	}
	return r, nil
}

// format encodes r as the annotation's value.
func (r Record) format() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain structs always marshal
	}
	return string(b)
}

// withRestart is r after deciding to restart failing at now with request name.
func (r Record) withRestart(s *Settings, failing []Failure, now time.Time, name string) Record {
	out := Record{Containers: map[string]ContainerRecord{}, Request: name, Requested: ptr.To(metav1.NewMicroTime(now))}
	for c, cr := range r.Containers {
		out.Containers[c] = cr
	}
	for _, f := range failing {
		out.Containers[f.Container] = ContainerRecord{
			Failure:     metav1.Time{Time: f.Since},
			Restarts:    restartsAfter(s, r, f),
			LastRestart: metav1.NewMicroTime(now),
		}
	}
	return out
}

// finished is r after its request ended; the failures of containers the request did not
// restart are forgotten, so they are decided again (after the backoff the attempt counts for).
func (r Record) finished(notRestarted []string) Record {
	out := Record{Containers: map[string]ContainerRecord{}}
	for c, cr := range r.Containers {
		out.Containers[c] = cr
	}
	for _, c := range notRestarted {
		if cr, ok := out.Containers[c]; ok {
			cr.Failure = metav1.Time{}
			out.Containers[c] = cr
		}
	}
	return out
}

// RequestName is the name of the request for attempt (the restart count it makes) at failing of
// pod: the same decision always gives the same name, so a second create of it (another replica,
// a stale cache) fails with AlreadyExists instead of restarting twice; a retry of a request that
// failed is a new attempt, with a new name.
func RequestName(podName string, uid types.UID, failing []Failure, attempt int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s#%d", uid, attempt)
	for _, f := range failing {
		fmt.Fprintf(h, "/%s@%d", f.Container, f.Since.UnixNano())
	}
	suffix := "-liveness-" + hex.EncodeToString(h.Sum(nil))[:10]
	const maxName = 253
	if len(podName) > maxName-len(suffix) {
		podName = podName[:maxName-len(suffix)]
	}
	return podName + suffix
}
