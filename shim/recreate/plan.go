// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/prober"
)

// notFoundTimeout is how long a container may be unknown on the node (neither the runtime nor the
// pod status has it) before it counts as Failed.
const notFoundTimeout = time.Minute

// observed is what the node sees of one container right now.
type observed struct {
	// rt is the newest instance of the container known to the runtime (the tracker); rtOK is
	// false when there is none.
	rt   prober.ContainerStatus
	rtOK bool
	// api is the container's entry in the pod status, as the kubelet last reported it; nil when
	// absent. It is what says "running again": the kubelet reports a restarted container only
	// after its postStart hook, so a container counts as back when its users can see it back.
	api *corev1.ContainerStatus
}

// currentID is the ID of the container instance running (or last run) now.
func (o observed) currentID() string {
	if o.rtOK {
		return o.rt.ID
	}
	if o.api != nil {
		return stripID(o.api.ContainerID)
	}
	return ""
}

// memory is what this process knows about one container of one request beyond the request's
// status. It is lost on a restart of the node service; the status (isKilled) is what survives.
type memory struct {
	inFlight     bool      // a kill (preStop, then stop) runs now
	killedID     string    // the instance this process stopped, or found replaced already
	selfRestart  bool      // killedID was replaced without a kill of ours
	recreatedAs  string    // the instance that replaced killedID, once it counts as recreated
	stopErr      string    // why the stop failed
	resumed      bool      // an interrupted stop was resumed after a restart of the service
	missingSince time.Time // when the container was first not found on the node
}

// killOrder asks for the stop of one container instance.
type killOrder struct {
	container string
	target    string // runtime container ID
	preStop   bool   // run the preStop hook first
	resume    bool   // the request already records the kill: stop the same instance, nothing else
}

// input is one evaluation of a request.
type input struct {
	crr     *v1alpha1.ContainerRecreateRequest
	pod     *corev1.Pod
	now     time.Time
	observe func(container string) observed
	mem     func(container string) *memory
}

// decision is what to do about a request now.
type decision struct {
	states   []v1alpha1.ContainerRecreateRequestContainerRecreateState
	kills    []killOrder
	complete bool
	message  string    // the request's message when complete
	wake     time.Time // look again then (zero: only on events)
	// recreated are the containers that became Succeeded in this evaluation, for the journal and
	// the pod's events: their states' messages stay empty, as OpenKruise's (clients compare them).
	recreated []recreation
}

// recreation is a container recreated as instance id, or found restarted on its own (selfRestart).
type recreation struct {
	container, id string
	selfRestart   bool
}

// plan evaluates a request that its node works on (Recreating, unready grace over): the state of
// every container, which containers to stop now, and whether the request is done. It updates
// the memory of containers it finds replaced without a kill.
func plan(in input) decision {
	var d decision
	strategy := in.crr.Spec.Strategy
	if strategy == nil {
		strategy = &v1alpha1.ContainerRecreateRequestStrategy{}
	}
	prev := map[string]v1alpha1.ContainerRecreateRequestContainerRecreateState{}
	for _, s := range in.crr.Status.ContainerRecreateStates {
		prev[s.Name] = s
	}

	// Pass 1: where each container stands, without starting anything.
	wantKill := make([]*killOrder, len(in.crr.Spec.Containers))
	firstFailed := ""
	for i := range in.crr.Spec.Containers {
		c := &in.crr.Spec.Containers[i]
		st, ok := prev[c.Name]
		if !ok {
			st = v1alpha1.ContainerRecreateRequestContainerRecreateState{Name: c.Name, Phase: v1alpha1.ContainerRecreateRequestPending}
		}
		if !terminal(st.Phase) {
			var wake time.Time
			st, wantKill[i], wake = evalContainer(in, c, st, strategy)
			d.wakeAt(wake)
			if st.Phase == v1alpha1.ContainerRecreateRequestSucceeded {
				m := in.mem(c.Name)
				d.recreated = append(d.recreated, recreation{container: c.Name, id: m.recreatedAs, selfRestart: m.selfRestart})
			}
		}
		if st.Phase == v1alpha1.ContainerRecreateRequestFailed && firstFailed == "" {
			firstFailed = c.Name
		}
		d.states = append(d.states, st)
	}

	// Pass 2: which stops start now.
	stopAll := firstFailed != "" && strategy.FailurePolicy != v1alpha1.ContainerRecreateRequestFailurePolicyIgnore
	for i := range d.states {
		st := &d.states[i]
		if terminal(st.Phase) {
			continue
		}
		k := wantKill[i]
		if stopAll {
			if k != nil && !k.resume {
				// Never started: it will not be now.
				st.Phase = v1alpha1.ContainerRecreateRequestFailed
				st.Message = fmt.Sprintf("not recreated: container %s failed and the failurePolicy is Fail", firstFailed)
			} else if k != nil {
				d.kills = append(d.kills, *k) // finish a stop already recorded
			}
			continue
		}
		if k != nil {
			d.kills = append(d.kills, *k)
		}
		if strategy.OrderedRecreate {
			break // the first container not done holds the rest back
		}
	}

	done := true
	var ok, failed []string
	for _, st := range d.states {
		switch st.Phase {
		case v1alpha1.ContainerRecreateRequestSucceeded:
			ok = append(ok, st.Name)
		case v1alpha1.ContainerRecreateRequestFailed:
			failed = append(failed, st.Name+" ("+st.Message+")")
		default:
			done = false
		}
	}
	if done {
		d.complete, d.wake = true, time.Time{}
		var parts []string
		if len(ok) > 0 {
			parts = append(parts, "recreated "+strings.Join(ok, ", "))
		}
		if len(failed) > 0 {
			parts = append(parts, "failed "+strings.Join(failed, ", "))
		}
		d.message = strings.Join(parts, "; ")
	}
	return d
}

// evalContainer is the state machine of one container that is not done yet. It returns the new
// state, the stop it wants (nil: none) and when to look again.
func evalContainer(in input, c *v1alpha1.ContainerRecreateRequestContainer, st v1alpha1.ContainerRecreateRequestContainerRecreateState,
	strategy *v1alpha1.ContainerRecreateRequestStrategy) (v1alpha1.ContainerRecreateRequestContainerRecreateState, *killOrder, time.Time) {
	m := in.mem(c.Name)
	obs := in.observe(c.Name)
	origID := ""
	if c.StatusContext != nil {
		origID = stripID(c.StatusContext.ContainerID)
	}

	switch {
	case m.inFlight:
		st.Phase = v1alpha1.ContainerRecreateRequestRecreating
		return st, nil, time.Time{}
	case m.stopErr != "":
		return failed(st, "stopping the container failed: "+m.stopErr), nil, time.Time{}
	}

	killed := m.killedID
	if killed == "" && st.IsKilled {
		// Stopped before this process started: the request's own record says so.
		killed = origID
	}
	if killed == "" && !strategy.ForceRecreate && origID != "" {
		if cur := obs.currentID(); cur != "" && cur != origID {
			// Restarted on its own since the request was made: that is the recreation asked
			// for, and stopping the new instance would restart it a second time.
			m.killedID, m.selfRestart, killed = origID, true, origID
		}
	}

	if killed != "" {
		if st.IsKilled && m.killedID == "" && !m.resumed && obs.rtOK && obs.rt.ID == killed && obs.rt.Running {
			// The service stopped while stopping it: finish the stop of that same instance.
			// It can never hit the new instance, which has another ID. (The starter sets
			// m.resumed, so a decision that is not carried out is taken again.)
			st.Phase = v1alpha1.ContainerRecreateRequestRecreating
			return st, &killOrder{container: c.Name, target: killed, resume: true}, time.Time{}
		}
		return follow(in, c, st, obs, killed, m, strategy)
	}

	cur := obs.currentID()
	if cur == "" {
		if m.missingSince.IsZero() {
			m.missingSince = in.now
		}
		if left := m.missingSince.Add(notFoundTimeout).Sub(in.now); left > 0 {
			st.Phase, st.Message = v1alpha1.ContainerRecreateRequestPending, "container not found on the node"
			return st, nil, in.now.Add(left)
		}
		return failed(st, fmt.Sprintf("container not found on the node for %v", notFoundTimeout)), nil, time.Time{}
	}
	m.missingSince = time.Time{}
	running := obs.rtOK && obs.rt.Running
	hook, _ := hookOf(in.pod, c.Name) // the pod's own hook, never the request's copy
	return st, &killOrder{container: c.Name, target: cur, preStop: hook != nil && running}, time.Time{}
}

// follow is the state of a container whose instance killed was stopped (or replaced): Succeeded
// once the kubelet reports another instance running (for minStartedSeconds; m.recreatedAs names
// it), Failed when that instance exits or the pod does not restart containers.
func follow(in input, c *v1alpha1.ContainerRecreateRequestContainer, st v1alpha1.ContainerRecreateRequestContainerRecreateState,
	obs observed, killed string, m *memory, strategy *v1alpha1.ContainerRecreateRequestStrategy) (v1alpha1.ContainerRecreateRequestContainerRecreateState, *killOrder, time.Time) {
	st.Phase = v1alpha1.ContainerRecreateRequestRecreating
	api := obs.api
	if api == nil {
		st.Message = "waiting for the container to be restarted"
		return st, nil, time.Time{}
	}
	id := stripID(api.ContainerID)
	if id != "" && id != killed {
		if r := api.State.Running; r != nil {
			started := r.StartedAt.Time
			if obs.rtOK && obs.rt.ID == id && !obs.rt.StartedAt.IsZero() {
				started = obs.rt.StartedAt // the runtime's is exact; the API's is in whole seconds
			}
			minStarted := time.Duration(strategy.MinStartedSeconds) * time.Second
			if until := started.Add(minStarted); in.now.Before(until) {
				st.Message = fmt.Sprintf("container %s started, waiting for minStartedSeconds (%ds)", shortID(id), strategy.MinStartedSeconds)
				return st, nil, until
			}
			st.Phase, st.Message = v1alpha1.ContainerRecreateRequestSucceeded, ""
			m.recreatedAs = id
			return st, nil, time.Time{}
		}
		if t := exitOf(api, id); t != nil {
			return failed(st, fmt.Sprintf("recreated container %s exited: %s", shortID(id), describeExit(t))), nil, time.Time{}
		}
		st.Message = "waiting for container " + shortID(id) + " to run"
		return st, nil, time.Time{}
	}
	if t := api.State.Terminated; t != nil && id == killed && !restarts(in.pod, c.Name, t.ExitCode) {
		return failed(st, fmt.Sprintf("stopped, but the pod's restartPolicy %s does not restart it", in.pod.Spec.RestartPolicy)), nil, time.Time{}
	}
	st.Message = "waiting for the container to be restarted"
	return st, nil, time.Time{}
}

// exitOf returns how instance id of the container ended, or nil while it has not.
func exitOf(api *corev1.ContainerStatus, id string) *corev1.ContainerStateTerminated {
	if t := api.State.Terminated; t != nil {
		return t
	}
	if t := api.LastTerminationState.Terminated; t != nil && stripID(t.ContainerID) == id {
		return t // in back-off after it exited
	}
	return nil
}

func describeExit(t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("exit code %d", t.ExitCode)
	if t.Reason != "" {
		s = t.Reason + ", " + s
	}
	return s
}

// restarts reports whether the kubelet restarts the container after an exit with code.
func restarts(pod *corev1.Pod, container string, code int32) bool {
	if pod == nil {
		return true
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == container && c.RestartPolicy != nil {
			return *c.RestartPolicy == corev1.ContainerRestartPolicyAlways // a sidecar
		}
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

func failed(st v1alpha1.ContainerRecreateRequestContainerRecreateState, msg string) v1alpha1.ContainerRecreateRequestContainerRecreateState {
	st.Phase, st.Message = v1alpha1.ContainerRecreateRequestFailed, msg
	return st
}

func terminal(p v1alpha1.ContainerRecreateRequestPhase) bool {
	return p == v1alpha1.ContainerRecreateRequestSucceeded || p == v1alpha1.ContainerRecreateRequestFailed
}

func (d *decision) wakeAt(t time.Time) {
	if !t.IsZero() && (d.wake.IsZero() || t.Before(d.wake)) {
		d.wake = t
	}
}

// stripID turns "containerd://abc" into "abc", as the runtime names containers.
func stripID(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		return rest
	}
	return id
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
