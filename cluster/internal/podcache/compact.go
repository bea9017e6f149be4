// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podcache

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"
	"unique"
	"weak"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// compactPod is what the pod informer of NewInformer stores: the fields Slim keeps, packed. An
// empty corev1.Pod alone is 1,240 B; this is a few hundred bytes per pod:
//   - what pods share is a unique handle (8 B): namespace, node, phase, owner references, names
//     of containers and conditions;
//   - labels and annotations are each one interned string (the pods of a workload carry the same);
//   - the spec part Slim keeps (containers, readiness gates, hostNetwork, grace period) is one
//     shared *podSpec per distinct content;
//   - times hold whole seconds, as the API serializes them, and read back in UTC.
//
// Reads get it back as the *corev1.Pod Slim makes (pod), semantically equal to it
// (equality.Semantic: the same instants, an empty list as nil); metadata selfLink, always empty
// since Kubernetes 1.20, is not kept.
type compactPod struct {
	typeMeta      unique.Handle[metav1.TypeMeta]
	name          string
	generateName  unique.Handle[string]
	namespace     unique.Handle[string]
	uid           types.UID
	rv            string
	generation    int64
	created       int64
	deleted       *metav1.Time
	deletionGrace *int64
	labels        unique.Handle[string] // encodeMap; zero: nil map
	annotations   unique.Handle[string]
	owners        []unique.Handle[owner]
	finalizers    []string
	nodeName      unique.Handle[string]
	spec          *podSpec
	phase         unique.Handle[string]
	podIP         string
	conditions    []condition
	initStatuses  []status
	statuses      []status
}

type owner struct {
	apiVersion, kind, name string
	uid                    types.UID
	controller, block      int8 // optBool
}

type condition struct {
	typ, status, reason           unique.Handle[string]
	message                       string
	observedGeneration            int64
	lastProbeTime, lastTransition int64
}

type status struct {
	name         unique.Handle[string]
	containerID  string
	restartCount int32
	started      int8 // optBool
	running      bool
	runningSince int64
}

// podSpec is the part of a slim pod's spec shared by the pods of a workload: immutable once made.
type podSpec struct {
	HostNetwork    bool                      `json:"h,omitempty"`
	Grace          *int64                    `json:"g,omitempty"`
	ReadinessGates []corev1.PodReadinessGate `json:"r,omitempty"`
	InitContainers []corev1.Container        `json:"i,omitempty"`
	Containers     []corev1.Container        `json:"c,omitempty"`
}

// GetObjectMeta makes compactPod a metav1.ObjectMetaAccessor: the informer's store keys items
// by namespace and name and compares resource versions through meta.Accessor.
func (c *compactPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: str(c.namespace), Name: c.name, UID: c.uid, ResourceVersion: c.rv}
}

// compact packs the slim pod s (the output of Slim).
func compact(s *corev1.Pod) *compactPod {
	c := &compactPod{
		name: s.Name, uid: s.UID, rv: s.ResourceVersion, generation: s.Generation,
		created: seconds(s.CreationTimestamp), deleted: s.DeletionTimestamp, deletionGrace: s.DeletionGracePeriodSeconds,
		generateName: handle(s.GenerateName), namespace: handle(s.Namespace),
		labels: encodeMap(s.Labels), annotations: encodeMap(s.Annotations), finalizers: s.Finalizers,
		nodeName: handle(s.Spec.NodeName), phase: handle(string(s.Status.Phase)), podIP: s.Status.PodIP,
		spec: shareSpec(&podSpec{HostNetwork: s.Spec.HostNetwork, Grace: s.Spec.TerminationGracePeriodSeconds,
			ReadinessGates: s.Spec.ReadinessGates, InitContainers: s.Spec.InitContainers, Containers: s.Spec.Containers}),
		initStatuses: packStatuses(s.Status.InitContainerStatuses), statuses: packStatuses(s.Status.ContainerStatuses),
	}
	if s.TypeMeta != (metav1.TypeMeta{}) {
		c.typeMeta = unique.Make(s.TypeMeta)
	}
	if s.OwnerReferences != nil {
		c.owners = make([]unique.Handle[owner], len(s.OwnerReferences))
		for i, r := range s.OwnerReferences {
			c.owners[i] = unique.Make(owner{r.APIVersion, r.Kind, r.Name, r.UID, optBool(r.Controller), optBool(r.BlockOwnerDeletion)})
		}
	}
	if s.Status.Conditions != nil {
		c.conditions = make([]condition, len(s.Status.Conditions))
		for i, k := range s.Status.Conditions {
			c.conditions[i] = condition{typ: handle(string(k.Type)), status: handle(string(k.Status)), reason: handle(k.Reason),
				message: k.Message, observedGeneration: k.ObservedGeneration,
				lastProbeTime: seconds(k.LastProbeTime), lastTransition: seconds(k.LastTransitionTime)}
		}
	}
	return c
}

// pod unpacks c into the pod Slim made. The result is new but for what the cached pods of a
// workload share (containers, readiness gates, grace period, deletion stamp): like a pod from the
// cache, it is read, not changed.
func (c *compactPod) pod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: c.name, GenerateName: str(c.generateName), Namespace: str(c.namespace),
			UID: c.uid, ResourceVersion: c.rv, Generation: c.generation, CreationTimestamp: fromSeconds(c.created),
			DeletionTimestamp: c.deleted, DeletionGracePeriodSeconds: c.deletionGrace,
			Labels: decodeMap(c.labels), Annotations: decodeMap(c.annotations), Finalizers: c.finalizers},
		Spec: corev1.PodSpec{NodeName: str(c.nodeName), HostNetwork: c.spec.HostNetwork,
			TerminationGracePeriodSeconds: c.spec.Grace, ReadinessGates: c.spec.ReadinessGates,
			InitContainers: c.spec.InitContainers, Containers: c.spec.Containers},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(str(c.phase)), PodIP: c.podIP,
			InitContainerStatuses: unpackStatuses(c.initStatuses), ContainerStatuses: unpackStatuses(c.statuses)},
	}
	if c.typeMeta != (unique.Handle[metav1.TypeMeta]{}) {
		p.TypeMeta = c.typeMeta.Value()
	}
	if c.owners != nil {
		p.OwnerReferences = make([]metav1.OwnerReference, len(c.owners))
		for i, h := range c.owners {
			o := h.Value()
			p.OwnerReferences[i] = metav1.OwnerReference{APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, UID: o.uid,
				Controller: fromOptBool(o.controller), BlockOwnerDeletion: fromOptBool(o.block)}
		}
	}
	if c.conditions != nil {
		p.Status.Conditions = make([]corev1.PodCondition, len(c.conditions))
		for i, k := range c.conditions {
			p.Status.Conditions[i] = corev1.PodCondition{Type: corev1.PodConditionType(str(k.typ)),
				Status: corev1.ConditionStatus(str(k.status)), Reason: str(k.reason), Message: k.message,
				ObservedGeneration: k.observedGeneration,
				LastProbeTime:      fromSeconds(k.lastProbeTime), LastTransitionTime: fromSeconds(k.lastTransition)}
		}
	}
	return p
}

func packStatuses(in []corev1.ContainerStatus) []status {
	if in == nil {
		return nil
	}
	out := make([]status, len(in))
	for i := range in {
		s := &in[i]
		out[i] = status{name: handle(s.Name), containerID: s.ContainerID, restartCount: s.RestartCount, started: optBool(s.Started)}
		if r := s.State.Running; r != nil {
			out[i].running, out[i].runningSince = true, seconds(r.StartedAt)
		}
	}
	return out
}

func unpackStatuses(in []status) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: str(s.name), ContainerID: s.containerID, RestartCount: s.restartCount, Started: fromOptBool(s.started)}
		if s.running {
			out[i].State.Running = &corev1.ContainerStateRunning{StartedAt: fromSeconds(s.runningSince)}
		}
	}
	return out
}

// handle interns s; "" is the zero handle, which holds nothing.
func handle(s string) unique.Handle[string] {
	if s == "" {
		return unique.Handle[string]{}
	}
	return unique.Make(s)
}

func str(h unique.Handle[string]) string {
	if h == (unique.Handle[string]{}) {
		return ""
	}
	return h.Value()
}

// A *bool as 0 (nil), 1 (false) or 2 (true).
func optBool(b *bool) int8 {
	switch {
	case b == nil:
		return 0
	case *b:
		return 2
	}
	return 1
}

func fromOptBool(v int8) *bool {
	if v == 0 {
		return nil
	}
	return ptr.To(v == 2)
}

// zeroTime stands for the zero metav1.Time (null in the API).
const zeroTime = math.MinInt64

func seconds(t metav1.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.Unix()
}

// fromSeconds makes the time in UTC (the API's decoding gives local time: the same instant;
// UTC prints the same on every machine).
func fromSeconds(s int64) metav1.Time {
	if s == zeroTime {
		return metav1.Time{}
	}
	return metav1.NewTime(time.Unix(s, 0).UTC())
}

// encodeMap interns m as one string: its size, then its sorted keys and values, each
// length-prefixed. The zero handle is a nil map.
func encodeMap(m map[string]string) unique.Handle[string] {
	if m == nil {
		return unique.Handle[string]{}
	}
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 2*binary.MaxVarintLen32
	}
	slices.Sort(keys)
	b := binary.AppendUvarint(make([]byte, 0, n+binary.MaxVarintLen32), uint64(len(m))) // the count: decodeMap sizes the map
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return unique.Make(string(b))
}

func decodeMap(h unique.Handle[string]) map[string]string {
	if h == (unique.Handle[string]{}) {
		return nil
	}
	s := h.Value()
	uvarint := func() int {
		n, shift := 0, 0
		for {
			b := s[0]
			s = s[1:]
			n |= int(b&0x7f) << shift
			if b < 0x80 {
				return n
			}
			shift += 7
		}
	}
	next := func() string {
		n := uvarint()
		v := s[:n]
		s = s[n:]
		return v
	}
	m := make(map[string]string, uvarint())
	for len(s) > 0 {
		k := next()
		m[k] = next() // substrings of the interned string: no copy
	}
	return m
}

// specs holds each distinct podSpec once, weakly: an entry goes when no cached pod holds it.
var specs = struct {
	sync.Mutex
	m map[unique.Handle[string]]weak.Pointer[podSpec]
}{m: map[unique.Handle[string]]weak.Pointer[podSpec]{}}

// shareSpec returns the podSpec equal to s that the cache holds already, or s, now held.
func shareSpec(s *podSpec) *podSpec {
	raw, err := json.Marshal(s)
	if err != nil { // not with these types; unshared is still correct
		return s
	}
	key := unique.Make(string(raw))
	specs.Lock()
	defer specs.Unlock()
	if held := specs.m[key].Value(); held != nil {
		return held
	}
	specs.m[key] = weak.Make(s)
	runtime.AddCleanup(s, func(k unique.Handle[string]) {
		specs.Lock()
		defer specs.Unlock()
		if specs.m[k].Value() == nil { // not a newer podSpec of the same content
			delete(specs.m, k)
		}
	}, key)
	return s
}
