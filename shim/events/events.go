// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package events writes the node service's core/v1 Events: a queue that never blocks its
// callers, identical events folded into one Event whose count grows (as the kubelet's recorder
// does), and a per-object rate limit. It replaces client-go's tools/record, whose recorder needs
// client-go's scheme of every API group (issue 20).
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/probeshim/probeshim/shim/kube"
)

// Limits, client-go's recorder's defaults.
const (
	// queueLen events wait to be written; more are dropped (as record's broadcaster does).
	queueLen = 1000
	// A burst of burst events per object, then one every refill.
	burst  = 25
	refill = 5 * time.Minute
	// cacheLen objects' limits and events are remembered; past it the memory starts over.
	cacheLen = 4096
	// writeTimeout bounds one API call.
	writeTimeout = 10 * time.Second
)

// Config wires a Recorder.
type Config struct {
	// Client writes the events: shim/kube's Events("").
	Client func(namespace string) kube.EventClient
	// Component and Host are the events' source (probeshim, the node's name).
	Component, Host string
	Log             logrus.FieldLogger
	Clock           clock.Clock
}

// Interface records an event about an object: a *Recorder, or client-go's record.FakeRecorder
// in tests. What the node service's parts that write events take.
type Interface interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

var _ Interface = (*Recorder)(nil)

// Recorder queues events and writes them from Run.
type Recorder struct {
	cfg   Config
	queue chan *corev1.Event

	// Run's alone.
	limits map[types.UID]flowcontrol.RateLimiter
	seen   map[key]written // the Event written for each distinct event
	last   int64           // the last name's nanoseconds: names stay unique within a clock tick

	dropped sync.Once
}

// written is the name and count of an Event written.
type written struct {
	name  string
	count int32
}

// key is what makes two events the same one, as record's aggregation key.
type key struct {
	ref                  corev1.ObjectReference
	typ, reason, message string
}

// New returns a Recorder; Run writes what Event queues.
func New(cfg Config) *Recorder {
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Recorder{cfg: cfg, queue: make(chan *corev1.Event, queueLen),
		limits: map[types.UID]flowcontrol.RateLimiter{}, seen: map[key]written{}}
}

// Event queues an event about object (a *corev1.ObjectReference or an object with metadata and
// its kind set), dropping it if the queue is full. It never blocks.
func (r *Recorder) Event(object runtime.Object, eventtype, reason, message string) {
	ref, err := reference(object)
	if err != nil {
		r.cfg.Log.WithError(err).WithField("reason", reason).Debug("event not recorded")
		return
	}
	now := metav1.NewTime(r.cfg.Clock.Now())
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: ref.Namespace},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		Type:                eventtype,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Source:              corev1.EventSource{Component: r.cfg.Component, Host: r.cfg.Host},
		ReportingController: r.cfg.Component,
		ReportingInstance:   r.cfg.Host,
	}
	select {
	case r.queue <- ev:
	default:
		r.dropped.Do(func() { r.cfg.Log.Warn("events dropped: the queue is full") })
	}
}

func reference(object runtime.Object) (*corev1.ObjectReference, error) {
	if ref, ok := object.(*corev1.ObjectReference); ok {
		return ref, nil
	}
	m, ok := object.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", object)
	}
	apiVersion, kind := object.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	if kind == "" {
		return nil, fmt.Errorf("%T %s/%s: kind not set", object, m.GetNamespace(), m.GetName())
	}
	return &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: m.GetNamespace(),
		Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}, nil
}

// Run writes queued events until ctx is done.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.queue:
			r.write(ctx, ev)
		}
	}
}

// write folds ev into the Event written for the same event before (a patch of its count), or
// creates it; an object past its rate limit gets nothing written.
func (r *Recorder) write(ctx context.Context, ev *corev1.Event) {
	if len(r.limits) >= cacheLen {
		r.limits = map[types.UID]flowcontrol.RateLimiter{}
	}
	if len(r.seen) >= cacheLen {
		r.seen = map[key]written{}
	}
	limitKey := ev.InvolvedObject.UID
	if limitKey == "" {
		limitKey = types.UID(ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name)
	}
	limit, ok := r.limits[limitKey]
	if !ok {
		limit = flowcontrol.NewTokenBucketRateLimiterWithClock(float32(1/refill.Seconds()), burst, r.cfg.Clock)
		r.limits[limitKey] = limit
	}
	if !limit.TryAccept() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	k := key{ref: ev.InvolvedObject, typ: ev.Type, reason: ev.Reason, message: ev.Message}
	log := r.cfg.Log.WithFields(logrus.Fields{"namespace": ev.InvolvedObject.Namespace, "pod": ev.InvolvedObject.Name, "reason": ev.Reason})
	client := r.cfg.Client(ev.Namespace)
	if prev, ok := r.seen[k]; ok {
		patch, _ := json.Marshal(map[string]any{"count": prev.count + 1, "lastTimestamp": ev.LastTimestamp, "message": ev.Message})
		got, err := client.Patch(ctx, prev.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			r.seen[k] = written{got.Name, got.Count}
			return
		}
		if !apierrors.IsNotFound(err) { // gone (events expire): written anew below
			log.WithError(err).Debug("event not updated")
			return
		}
	}
	r.last = max(r.last+1, r.cfg.Clock.Now().UnixNano())
	ev.Name = fmt.Sprintf("%s.%x", ev.InvolvedObject.Name, r.last)
	got, err := client.Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		log.WithError(err).Debug("event not written")
		delete(r.seen, k)
		return
	}
	r.seen[k] = written{got.Name, got.Count}
}
