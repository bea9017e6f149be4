// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	shimruntime "github.com/probeshim/probeshim/shim/runtime"
)

// podWorker runs the requests of one pod, one at a time, in its own goroutine: a stop that takes
// the whole grace period holds up only this pod. It exits when the pod has no requests left.
type podWorker struct {
	e      *Executor
	podUID string
	kicks  chan struct{}
	done   chan struct{}

	mu   sync.Mutex
	runs map[types.UID]*run // by request UID
}

// run is this process's memory of one request.
type run struct {
	ctx        context.Context // ends when the request does: a preStop hook in flight stops
	cancel     context.CancelFunc
	containers map[string]*memory
}

func newPodWorker(e *Executor, podUID string) *podWorker {
	return &podWorker{e: e, podUID: podUID, kicks: make(chan struct{}, 1), done: make(chan struct{}), runs: map[types.UID]*run{}}
}

func (w *podWorker) poke() {
	select {
	case w.kicks <- struct{}{}:
	default:
	}
}

func (w *podWorker) run() {
	defer close(w.done)
	ctx := w.e.ctx
	select {
	case <-w.e.ready:
	case <-ctx.Done():
		return
	}
	timer := w.e.cfg.Clock.NewTimer(poll)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-w.kicks:
		case <-timer.C():
		}
		if ctx.Err() != nil { // also when a kick raced with the end: start nothing new
			w.mu.Lock()
			for _, r := range w.runs {
				r.cancel()
			}
			w.mu.Unlock()
			return
		}
		next, idle := w.step(ctx)
		if idle && w.e.retire(w) {
			return
		}
		if next <= 0 || next > poll {
			next = poll
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(next)
	}
}

// step looks at the pod's requests once: the oldest one in progress (or else the oldest) is
// advanced, the others are marked Pending. It returns when to look again, and whether the pod has
// nothing left to do.
func (w *podWorker) step(ctx context.Context) (time.Duration, bool) {
	reqs := w.e.requestsOf(w.podUID)
	if w.forgetEnded(reqs) && len(reqs) == 0 {
		return 0, true
	}
	if len(reqs) == 0 {
		return poll, false // kills of ended requests still finishing
	}
	slices.SortFunc(reqs, func(a, b *v1alpha1.ContainerRecreateRequest) int {
		ar, br := a.Status.Phase == v1alpha1.ContainerRecreateRequestRecreating, b.Status.Phase == v1alpha1.ContainerRecreateRequestRecreating
		if ar != br {
			if ar {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for _, other := range reqs[1:] {
		if other.Status.Phase == "" {
			w.markPending(ctx, other, reqs[0].Name)
		}
	}
	next, err := w.advance(ctx, reqs[0])
	if err != nil {
		if !apierrors.IsConflict(err) && !errors.Is(err, errGone) && ctx.Err() == nil {
			w.logFor(reqs[0]).WithError(err).Warn("working on ContainerRecreateRequest")
		}
		return time.Second, false
	}
	return next, false
}

// forgetEnded drops the memory of requests that are no longer active, and reports whether no
// memory is left. A request's kill still in flight keeps its memory; its preStop is cancelled.
func (w *podWorker) forgetEnded(active []*v1alpha1.ContainerRecreateRequest) bool {
	keep := map[types.UID]bool{}
	for _, crr := range active {
		keep[crr.UID] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, r := range w.runs {
		if keep[uid] {
			continue
		}
		r.cancel()
		busy := false
		for _, m := range r.containers {
			busy = busy || m.inFlight
		}
		if !busy {
			delete(w.runs, uid)
		}
	}
	return len(w.runs) == 0
}

func (w *podWorker) runOf(crr *v1alpha1.ContainerRecreateRequest) *run {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.runs[crr.UID]
	if !ok {
		ctx, cancel := context.WithCancel(w.e.ctx)
		r = &run{ctx: ctx, cancel: cancel, containers: map[string]*memory{}}
		w.runs[crr.UID] = r
	}
	return r
}

// advance takes one step of the request the pod works on.
func (w *podWorker) advance(ctx context.Context, cached *v1alpha1.ContainerRecreateRequest) (time.Duration, error) {
	crr, err := w.get(ctx, cached)
	if err != nil {
		return 0, err
	}
	pod := w.e.pod(w.podUID)
	if pod == nil || pod.DeletionTimestamp != nil {
		// Not seen yet, or going: the cluster completes requests of pods that are gone.
		return poll, nil
	}
	now := w.e.cfg.Clock.Now()
	log := w.logFor(crr)
	if why := refusal(crr, pod, w.e.cfg.Node); why != "" {
		return poll, w.refuse(ctx, crr, why, now)
	}

	if crr.Status.Phase != v1alpha1.ContainerRecreateRequestRecreating {
		st := crr.Status.DeepCopy()
		st.Phase, st.Message = v1alpha1.ContainerRecreateRequestRecreating, ""
		st.ContainerRecreateStates = initialStates(crr)
		if err := w.patchStatus(ctx, crr, st); err != nil {
			return 0, err
		}
		log.Info("recreating containers")
		return 0, nil // our write's event brings us back
	}

	if s := crr.Spec.Strategy; s != nil && s.UnreadyGracePeriodSeconds != nil {
		at, waiting := crr.Annotations[v1alpha1.AnnotationCRRUnreadyAcquired], ""
		var until time.Time
		if at == "" {
			waiting = "waiting for the cluster to make the pod not ready (unreadyGracePeriodSeconds)"
		} else if t, err := time.Parse(time.RFC3339, at); err != nil {
			waiting = fmt.Sprintf("waiting for a valid %s annotation: %v", v1alpha1.AnnotationCRRUnreadyAcquired, err)
		} else if until = t.Add(time.Duration(*s.UnreadyGracePeriodSeconds) * time.Second); now.Before(until) {
			waiting = fmt.Sprintf("pod not ready since %s; containers are stopped after the unready grace period (%ds)",
				t.UTC().Format(time.RFC3339), *s.UnreadyGracePeriodSeconds)
		}
		if waiting != "" {
			if crr.Status.Message != waiting {
				st := crr.Status.DeepCopy()
				st.Message = waiting
				if err := w.patchStatus(ctx, crr, st); err != nil {
					return 0, err
				}
			}
			if until.IsZero() {
				return poll, nil
			}
			return until.Sub(now), nil
		}
	}

	r := w.runOf(crr)
	w.mu.Lock()
	d := plan(input{crr: crr, pod: pod, now: now,
		observe: func(name string) observed { return w.observe(pod, name) },
		mem: func(name string) *memory {
			m, ok := r.containers[name]
			if !ok {
				m = &memory{}
				r.containers[name] = m
			}
			return m
		}})
	w.mu.Unlock()

	st := crr.Status.DeepCopy()
	st.ContainerRecreateStates, st.Message = d.states, ""
	if d.complete {
		st.Phase, st.Message = v1alpha1.ContainerRecreateRequestCompleted, d.message
		st.CompletionTime = &metav1.Time{Time: now}
	}
	if !equality.Semantic.DeepEqual(st, &crr.Status) {
		if err := w.patchStatus(ctx, crr, st); err != nil {
			return 0, err // decided on what is no longer there: decide again
		}
		w.noteRecreated(crr, log, d.recreated)
		if d.complete {
			log.WithField("message", d.message).Info("ContainerRecreateRequest completed")
			return 0, nil
		}
	}
	for _, k := range d.kills {
		w.mu.Lock()
		m := r.containers[k.container]
		m.inFlight, m.resumed = true, m.resumed || k.resume
		w.mu.Unlock()
		w.e.ops.Add(1)
		go w.kill(crr, pod, r, k)
	}
	if d.wake.IsZero() {
		return poll, nil
	}
	return d.wake.Sub(now), nil
}

// noteRecreated tells the journal, and the pod's events where no Killing event explains it, which
// instance replaced each container that just became Succeeded.
func (w *podWorker) noteRecreated(crr *v1alpha1.ContainerRecreateRequest, log logrus.FieldLogger, done []recreation) {
	for _, r := range done {
		l := log.WithFields(logrus.Fields{"container": r.container, "new": shortID(r.id)})
		if !r.selfRestart {
			l.Info("container recreated")
			continue
		}
		l.Info("container restarted on its own since the request was made; not stopped again")
		w.e.event(crr, corev1.EventTypeNormal, EventReasonAlreadyRestarted,
			"Container %s restarted on its own since ContainerRecreateRequest %s was made (now %s): not stopped again",
			r.container, crr.Name, shortID(r.id))
	}
}

// refuse completes a request the node will not act on (see refusal): every container not yet
// done is Failed, and the message says why, so its author sees it at once instead of a request
// that never starts.
func (w *podWorker) refuse(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, why string, now time.Time) error {
	msg := capMessage("refused by node " + w.e.cfg.Node + ": " + why)
	st := crr.Status.DeepCopy()
	st.Phase, st.Message, st.CompletionTime = v1alpha1.ContainerRecreateRequestCompleted, msg, &metav1.Time{Time: now}
	st.ContainerRecreateStates = initialStates(crr)
	for i := range st.ContainerRecreateStates {
		if s := &st.ContainerRecreateStates[i]; !terminal(s.Phase) {
			s.Phase, s.Message = v1alpha1.ContainerRecreateRequestFailed, "not recreated: the node refused the request"
		}
	}
	if err := w.patchStatus(ctx, crr, st); err != nil {
		return err
	}
	w.logFor(crr).WithField("podUID", w.podUID).WithField("reason", why).Warn("ContainerRecreateRequest refused")
	return nil
}

func initialStates(crr *v1alpha1.ContainerRecreateRequest) []v1alpha1.ContainerRecreateRequestContainerRecreateState {
	prev := map[string]v1alpha1.ContainerRecreateRequestContainerRecreateState{}
	for _, s := range crr.Status.ContainerRecreateStates {
		prev[s.Name] = s
	}
	out := make([]v1alpha1.ContainerRecreateRequestContainerRecreateState, 0, len(crr.Spec.Containers))
	for _, c := range crr.Spec.Containers {
		s, ok := prev[c.Name]
		if !ok {
			s = v1alpha1.ContainerRecreateRequestContainerRecreateState{Name: c.Name, Phase: v1alpha1.ContainerRecreateRequestPending}
		}
		out = append(out, s)
	}
	return out
}

// observe reads what the runtime and the pod status say of a container.
func (w *podWorker) observe(pod *corev1.Pod, name string) observed {
	var o observed
	o.rt, o.rtOK = w.e.cfg.Containers.Container(w.podUID, name)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				o.api = &list[i]
				return o
			}
		}
	}
	return o
}

// markPending tells that a request waits for another one of the same pod, so the cluster does
// not take it for one the node never picked up.
func (w *podWorker) markPending(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, behind string) {
	st := crr.Status.DeepCopy()
	st.Phase = v1alpha1.ContainerRecreateRequestPending
	st.Message = "waiting for ContainerRecreateRequest " + behind + " of the same pod"
	if err := w.patchStatus(ctx, crr, st); err != nil && !apierrors.IsConflict(err) {
		w.logFor(crr).WithError(err).Warn("marking ContainerRecreateRequest Pending")
	}
}

// kill runs the preStop hook, records the kill and stops the container. It never stops anything
// for a request that has completed: the record is written with the request's resource version
// after reading it, so a completion in between makes it fail.
func (w *podWorker) kill(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod, r *run, k killOrder) {
	defer w.e.ops.Done()
	defer w.poke()
	w.mu.Lock()
	m := r.containers[k.container]
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		m.inFlight = false
		w.mu.Unlock()
	}()
	log := w.logFor(crr).WithFields(logrus.Fields{"container": k.container, "containerID": shortID(k.target)})
	grace := graceOf(crr, pod)
	begin := w.e.cfg.Clock.Now()

	if k.resume {
		if _, err := w.get(r.ctx, crr); err != nil {
			return // completed meanwhile (or unreadable): nothing is stopped for it
		}
		log.Warn("the node service stopped while stopping this container; finishing the stop of the same instance")
		w.stop(log, m, k.target, grace)
		return
	}

	if h, ports := hookOf(pod, k.container); k.preStop && grace > 0 && h != nil {
		if c := specContainer(crr, k.container); c != nil && c.PreStop != nil && !equality.Semantic.DeepEqual(c.PreStop, h) {
			log.Warn("the request's preStop differs from the pod's; running the pod's own")
		}
		ok := w.update(r.ctx, crr, func(cur *v1alpha1.ContainerRecreateRequest) bool {
			s := stateOf(cur, k.container)
			if s == nil || s.IsKilled || terminal(s.Phase) {
				return false
			}
			s.Phase, s.Message = v1alpha1.ContainerRecreateRequestRecreating, "running the preStop hook"
			return true
		})
		if !ok {
			return
		}
		err := runPreStop(r.ctx, w.e.cfg.Runtime, w.e.cfg.Network, pod, h, ports, k.target, grace)
		if r.ctx.Err() != nil {
			log.Info("request ended during the preStop hook; the container is not stopped")
			return
		}
		if err != nil {
			log.WithError(err).Warn("preStop hook failed; stopping the container anyway")
			w.e.event(crr, corev1.EventTypeWarning, EventReasonFailedPreStopHook,
				"PreStop hook for container %s failed (ContainerRecreateRequest %s): %v", k.container, crr.Name, err)
		}
	}

	remaining := max(grace-w.e.cfg.Clock.Since(begin), minGrace)
	ok := w.update(r.ctx, crr, func(cur *v1alpha1.ContainerRecreateRequest) bool {
		s := stateOf(cur, k.container)
		if s == nil || s.IsKilled || terminal(s.Phase) {
			return false // someone recorded it already: never a second stop
		}
		s.Phase, s.IsKilled = v1alpha1.ContainerRecreateRequestRecreating, true
		s.Message = fmt.Sprintf("stopping container %s (grace period %v)", shortID(k.target), remaining.Round(time.Second))
		return true
	})
	if !ok {
		return
	}
	w.mu.Lock()
	m.killedID = k.target
	w.mu.Unlock()
	log.WithField("grace", remaining.Round(time.Millisecond)).Info("stopping container")
	if why := crr.Annotations[v1alpha1.AnnotationCRRReason]; why != "" {
		// The kubelet's words, with the decider's why: whoever reads the pod's events learns it
		// was the liveness probe, and that the protections let it go.
		w.e.event(crr, corev1.EventTypeNormal, EventReasonKilling, "Container %s %s (ContainerRecreateRequest %s)",
			k.container, validation.TruncateMessage(why, v1alpha1.MaxCRRReasonBytes), crr.Name)
	} else {
		w.e.event(crr, corev1.EventTypeNormal, EventReasonKilling,
			"Stopping container %s for ContainerRecreateRequest %s", k.container, crr.Name)
	}
	w.stop(log, m, k.target, remaining)
}

// stop stops one container instance, retrying while the runtime is unreachable. Stopping an
// instance that already exited or is gone is success.
func (w *podWorker) stop(log logrus.FieldLogger, m *memory, id string, grace time.Duration) {
	grace = max(grace, minGrace)
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		ctx, cancel := context.WithTimeout(w.e.ctx, grace+30*time.Second)
		err = w.e.cfg.Runtime.StopContainer(ctx, id, grace)
		cancel()
		if err == nil || errors.Is(err, shimruntime.ErrNotFound) {
			log.Info("container stopped")
			return
		}
		if w.e.ctx.Err() != nil || !errors.Is(err, shimruntime.ErrUnavailable) {
			break
		}
		select {
		case <-w.e.ctx.Done():
		case <-w.e.cfg.Clock.After(time.Duration(attempt) * time.Second):
		}
	}
	if w.e.ctx.Err() != nil {
		return // shutting down: the record lets the next run finish the stop
	}
	log.WithError(err).Warn("stopping container failed")
	w.mu.Lock()
	m.stopErr = err.Error()
	w.mu.Unlock()
}

// update applies change to the request as the API server has it now and writes the status,
// conditionally on that version; it reports whether the write was made. change returns false to
// write nothing. Nothing is written once the request completed, was deleted or replaced.
func (w *podWorker) update(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, change func(*v1alpha1.ContainerRecreateRequest) bool) bool {
	log := w.logFor(crr)
	for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
		cur, err := w.get(ctx, crr)
		if errors.Is(err, errGone) {
			return false
		}
		if err == nil {
			if !change(cur) {
				return false
			}
			if err = w.patchStatus(ctx, cur, &cur.Status); err == nil {
				return true
			}
		}
		if !apierrors.IsConflict(err) {
			log.WithError(err).Warn("writing ContainerRecreateRequest status")
			select {
			case <-ctx.Done():
			case <-w.e.cfg.Clock.After(time.Duration(attempt+1) * 200 * time.Millisecond):
			}
		}
	}
	return false
}

// get reads the request from the API server; errGone when it is deleted, replaced (another UID)
// or completed.
func (w *podWorker) get(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest) (*v1alpha1.ContainerRecreateRequest, error) {
	cur := &v1alpha1.ContainerRecreateRequest{}
	err := w.e.cfg.Client.Get().Namespace(crr.Namespace).Resource("containerrecreaterequests").Name(crr.Name).Do(ctx).Into(cur)
	if apierrors.IsNotFound(err) {
		return nil, errGone
	}
	if err != nil {
		return nil, err
	}
	if cur.UID != crr.UID || cur.DeletionTimestamp != nil || completed(cur) {
		return nil, errGone
	}
	return cur, nil
}

// patchStatus writes st as the request's status, only if the request is still at the version
// crr was read at (a merge patch with the resourceVersion is a compare-and-swap).
func (w *podWorker) patchStatus(ctx context.Context, crr *v1alpha1.ContainerRecreateRequest, st *v1alpha1.ContainerRecreateRequestStatus) error {
	status := map[string]any{
		"phase":                   st.Phase,
		"message":                 st.Message, // present even when empty, to clear an old one
		"containerRecreateStates": st.ContainerRecreateStates,
	}
	if st.CompletionTime != nil {
		status["completionTime"] = st.CompletionTime
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": crr.ResourceVersion},
		"status":   status,
	})
	if err != nil {
		return err
	}
	return w.e.cfg.Client.Patch(types.MergePatchType).Namespace(crr.Namespace).Resource("containerrecreaterequests").
		Name(crr.Name).SubResource("status").Body(body).Do(ctx).Error()
}

func (w *podWorker) logFor(crr *v1alpha1.ContainerRecreateRequest) logrus.FieldLogger {
	return w.e.log.WithFields(logrus.Fields{"namespace": crr.Namespace, "pod": crr.Spec.PodName, "crr": crr.Name})
}

func stateOf(crr *v1alpha1.ContainerRecreateRequest, name string) *v1alpha1.ContainerRecreateRequestContainerRecreateState {
	for i := range crr.Status.ContainerRecreateStates {
		if crr.Status.ContainerRecreateStates[i].Name == name {
			return &crr.Status.ContainerRecreateStates[i]
		}
	}
	return nil
}

func specContainer(crr *v1alpha1.ContainerRecreateRequest, name string) *v1alpha1.ContainerRecreateRequestContainer {
	for i := range crr.Spec.Containers {
		if crr.Spec.Containers[i].Name == name {
			return &crr.Spec.Containers[i]
		}
	}
	return nil
}
