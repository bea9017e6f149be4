// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/prober"
)

// book is the node service's copy of the NodePodProbe status: the state of
// every probe the spec asks for. It is seeded from the status the API server
// already holds, so a restart of the service neither loses results nor
// reports false transitions.
type book struct {
	pods map[string]*podEntry // by pod UID
}

type podEntry struct {
	meta   podMeta
	probes map[string]*v1alpha1.ContainerProbeState // by probe name
}

// transition is a probe's state change that earns an event on the pod: to Succeeded or Failed,
// or to Unknown because the probe could not run (reason set; a new reason is a change too).
type transition struct {
	pod         podMeta
	probe       string
	prev, state v1alpha1.ProbeState // prev is "" for a probe's first result
	message     string
	reason      string // why the probe could not run, with message the error's text
}

func newBook() *book { return &book{pods: map[string]*podEntry{}} }

// seed loads the states of a status written earlier.
func (b *book) seed(st *v1alpha1.NodePodProbeStatus) {
	for _, ps := range st.PodProbeStatuses {
		e := b.pod(podMeta{uid: ps.UID, namespace: ps.Namespace, name: ps.Name})
		for i := range ps.ProbeStates {
			s := ps.ProbeStates[i]
			e.probes[s.Name] = &s
		}
	}
}

func (b *book) pod(m podMeta) *podEntry {
	e, ok := b.pods[m.uid]
	if !ok {
		e = &podEntry{meta: m, probes: map[string]*v1alpha1.ContainerProbeState{}}
		b.pods[m.uid] = e
	}
	e.meta = m
	return e
}

// retain drops the states of pods and probes the spec no longer has and
// records refused probes as Unknown with the reason. It reports whether the
// status changed.
func (b *book) retain(spec *v1alpha1.NodePodProbeSpec, refused []refusal, now time.Time) bool {
	changed := false
	want := map[string]map[string]bool{}
	for _, pp := range spec.PodProbes {
		names := map[string]bool{}
		for _, p := range pp.Probes {
			names[p.Name] = true
		}
		want[pp.UID] = names
		if e, ok := b.pods[pp.UID]; ok && (e.meta.name != pp.Name || e.meta.namespace != pp.Namespace) {
			e.meta = podMeta{uid: pp.UID, namespace: pp.Namespace, name: pp.Name}
			changed = true
		}
	}
	for uid, e := range b.pods {
		names, ok := want[uid]
		if !ok {
			delete(b.pods, uid)
			changed = true
			continue
		}
		for name := range e.probes {
			if !names[name] {
				delete(e.probes, name)
				changed = true
			}
		}
		if len(e.probes) == 0 {
			delete(b.pods, uid)
		}
	}
	for _, r := range refused {
		if _, ok := b.set(r.pod, r.key.Probe, v1alpha1.ProbeUnknown, r.reason, now); ok {
			changed = true
		}
	}
	return changed
}

// apply records a result of the engine. It reports whether the status changed,
// whether only a message changed (the state is the one the book held), and,
// for a change of state to Succeeded or Failed, or to Unknown for a reason
// the probe could not run, the transition.
func (b *book) apply(pod podMeta, u prober.Update) (changed, messageOnly bool, t *transition) {
	state := stateOf(u.Result)
	msg := u.Message
	if u.Reason != "" {
		msg = v1alpha1.ProbeErrorMessage(u.Reason, u.Message)
	}
	// The engine's first word on a container it has not probed yet (prober.NoResultYet).
	firstWord := state == v1alpha1.ProbeUnknown && (msg == "" || msg == prober.NoResultYet)
	if firstWord || state == v1alpha1.ProbeUnknown && u.Errored {
		// No result yet, or why the engine could not probe it yet. A result seeded from an
		// earlier run is better than that (an error while the service restarts, say); an
		// Unknown seeded is not better than a reason.
		if e, ok := b.pods[pod.uid]; ok && e.probes[u.Key.Probe] != nil &&
			(firstWord || e.probes[u.Key.Probe].State != v1alpha1.ProbeUnknown) {
			return false, false, nil
		}
	}
	known, prevReason := false, ""
	if e, ok := b.pods[pod.uid]; ok && e.probes[u.Key.Probe] != nil {
		known = true
		if s := e.probes[u.Key.Probe]; s.State == v1alpha1.ProbeUnknown {
			// Read back from the message, so that a reason seeded from an earlier run is no news.
			prevReason, _, _ = v1alpha1.ParseProbeError(s.Message)
		}
	}
	prev, changed := b.set(pod, u.Key.Probe, state, msg, u.Time)
	switch {
	case !changed:
	case prev != state && state != v1alpha1.ProbeUnknown:
		t = &transition{pod: pod, probe: u.Key.Probe, prev: prev, state: state, message: u.Message}
	case u.Reason != "" && (prev != state || prevReason != u.Reason):
		t = &transition{pod: pod, probe: u.Key.Probe, prev: prev, state: state, message: u.Message, reason: u.Reason}
	}
	return changed, changed && known && prev == state && t == nil, t
}

// set stores a state and returns the previous one and whether anything changed.
func (b *book) set(pod podMeta, probe string, state v1alpha1.ProbeState, msg string, now time.Time) (v1alpha1.ProbeState, bool) {
	e := b.pod(pod)
	s, ok := e.probes[probe]
	if !ok {
		s = &v1alpha1.ContainerProbeState{Name: probe}
		e.probes[probe] = s
	}
	prev := s.State
	if ok && prev == state && s.Message == msg {
		return prev, false
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	if prev != state {
		s.LastTransitionTime = t
	}
	s.State, s.Message, s.LastProbeTime = state, msg, t
	return prev, true
}

// touch sets lastProbeTime of the given probes, for the periodic refresh.
func (b *book) touch(now time.Time, probed func(uid, probe string) bool) bool {
	t := metav1.NewTime(now.Truncate(time.Second))
	changed := false
	for uid, e := range b.pods {
		for name, s := range e.probes {
			if probed(uid, name) && !s.LastProbeTime.Equal(&t) {
				s.LastProbeTime = t
				changed = true
			}
		}
	}
	return changed
}

// status renders the book sorted, so equal books give equal patches. Messages share
// validation.NodeStatusMessageBudget: with many probes each is cut to its share, so the status
// stays far under the object limit even when every probe fails with a long message.
func (b *book) status() []v1alpha1.PodProbeStatus {
	n := 0
	for _, e := range b.pods {
		n += len(e.probes)
	}
	limit := validation.MessageCap(n)
	out := make([]v1alpha1.PodProbeStatus, 0, len(b.pods))
	for _, e := range b.pods {
		ps := v1alpha1.PodProbeStatus{Name: e.meta.name, Namespace: e.meta.namespace, UID: e.meta.uid}
		for _, s := range e.probes {
			st := *s.DeepCopy()
			st.Message = validation.TruncateMessage(st.Message, limit)
			ps.ProbeStates = append(ps.ProbeStates, st)
		}
		slices.SortFunc(ps.ProbeStates, func(a, b v1alpha1.ContainerProbeState) int { return cmp.Compare(a.Name, b.Name) })
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b v1alpha1.PodProbeStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return out
}

func stateOf(r prober.Result) v1alpha1.ProbeState {
	switch r {
	case prober.Success:
		return v1alpha1.ProbeSucceeded
	case prober.Failure:
		return v1alpha1.ProbeFailed
	default:
		return v1alpha1.ProbeUnknown
	}
}
