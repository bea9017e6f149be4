// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/prober"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// world is a request and what the node sees, for one evaluation.
type world struct {
	crr  *v1alpha1.ContainerRecreateRequest
	pod  *corev1.Pod
	rt   map[string]prober.ContainerStatus
	api  map[string]*corev1.ContainerStatus
	mem  map[string]*memory
	now  time.Time
	last decision
}

// newWorld: containers a and b, both running as the instances the request was made for (a1,
// b1); a has a preStop hook.
func newWorld(mut func(*v1alpha1.ContainerRecreateRequestStrategy)) *world {
	s := &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail}
	if mut != nil {
		mut(s)
	}
	w := &world{
		crr: &v1alpha1.ContainerRecreateRequest{
			Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "p", Strategy: s, Containers: []v1alpha1.ContainerRecreateRequestContainer{
				{Name: "a", StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://a1"},
					PreStop: &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}},
				{Name: "b", StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://b1"}},
			}},
			Status: v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating,
				ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
					{Name: "a", Phase: v1alpha1.ContainerRecreateRequestPending}, {Name: "b", Phase: v1alpha1.ContainerRecreateRequestPending}}},
		},
		pod: &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{
			{Name: "a", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}},
			{Name: "b"}}}},
		rt:  map[string]prober.ContainerStatus{},
		api: map[string]*corev1.ContainerStatus{},
		mem: map[string]*memory{},
		now: t0,
	}
	for _, n := range []string{"a", "b"} {
		w.running(n, n+"1", t0.Add(-time.Hour))
	}
	return w
}

// running makes id the running instance of container n, in the runtime and in the pod status.
func (w *world) running(n, id string, started time.Time) {
	w.rt[n] = prober.ContainerStatus{ID: id, Running: true, StartedAt: started}
	w.api[n] = &corev1.ContainerStatus{Name: n, ContainerID: "containerd://" + id,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started.Truncate(time.Second))}}}
}

func (w *world) state(n string) *v1alpha1.ContainerRecreateRequestContainerRecreateState {
	return stateOf(w.crr, n)
}

// eval runs plan and stores its states in the request, as the write would.
func (w *world) eval() string {
	w.last = plan(input{crr: w.crr, pod: w.pod, now: w.now,
		observe: func(n string) observed {
			rt, ok := w.rt[n]
			return observed{rt: rt, rtOK: ok, api: w.api[n]}
		},
		mem: func(n string) *memory {
			if w.mem[n] == nil {
				w.mem[n] = &memory{}
			}
			return w.mem[n]
		}})
	w.crr.Status.ContainerRecreateStates = w.last.states
	return w.render()
}

func (w *world) render() string {
	var parts []string
	for _, s := range w.last.states {
		p := s.Name + "=" + string(s.Phase)
		if s.IsKilled {
			p += "(killed)"
		}
		parts = append(parts, p)
	}
	for _, k := range w.last.kills {
		p := "stop " + k.container + ":" + k.target
		if k.preStop {
			p += "+preStop"
		}
		if k.resume {
			p += "(resume)"
		}
		parts = append(parts, p)
	}
	if w.last.complete {
		parts = append(parts, fmt.Sprintf("complete %q", w.last.message))
	}
	if !w.last.wake.IsZero() {
		parts = append(parts, "wake +"+w.last.wake.Sub(w.now).String())
	}
	return strings.Join(parts, " ")
}

// killed records what the kill of n does in this process: the record, then the stop.
func (w *world) killed(n string) {
	w.mem[n].inFlight = false
	w.mem[n].killedID = w.rt[n].ID
	w.state(n).IsKilled = true
}

func (w *world) msg(n string) string { return w.state(n).Message }

// recreated renders the last evaluation's recreations, "container:instance", "(self)" for one that
// restarted on its own.
func (w *world) recreated() string {
	var parts []string
	for _, r := range w.last.recreated {
		p := r.container + ":" + r.id
		if r.selfRestart {
			p += "(self)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func expect(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("\n got: %s\nwant: %s", got, want)
	}
}

func TestPlanUnordered(t *testing.T) {
	w := newWorld(nil)
	// Both stop at once; only the hook's container runs it.
	expect(t, w.eval(), "a=Pending b=Pending stop a:a1+preStop stop b:b1")
	w.mem["a"].inFlight, w.mem["b"].inFlight = true, true
	expect(t, w.eval(), "a=Recreating b=Recreating")

	w.killed("a")
	w.killed("b")
	// The kubelet has not restarted them yet.
	expect(t, w.eval(), "a=Recreating(killed) b=Recreating(killed)")
	expect(t, w.msg("a"), "waiting for the container to be restarted")
	// A new instance created, not yet reported running (e.g. in its postStart hook).
	w.rt["a"] = prober.ContainerStatus{ID: "a2", Running: true, StartedAt: t0}
	expect(t, w.eval(), "a=Recreating(killed) b=Recreating(killed)")
	w.running("a", "a2", t0)
	w.running("b", "b2", t0)
	expect(t, w.eval(), `a=Succeeded(killed) b=Succeeded(killed) complete "recreated a, b"`)
	// OpenKruise leaves a Succeeded state's message empty, and clients compare it; the new
	// instance goes to the journal.
	expect(t, w.msg("a"), "")
	expect(t, w.recreated(), "a:a2 b:b2")
}

func TestPlanOrdered(t *testing.T) {
	w := newWorld(func(s *v1alpha1.ContainerRecreateRequestStrategy) { s.OrderedRecreate = true; s.MinStartedSeconds = 5 })
	expect(t, w.eval(), "a=Pending b=Pending stop a:a1+preStop")
	w.mem["a"].inFlight = true
	expect(t, w.eval(), "a=Recreating b=Pending")
	w.killed("a")
	w.running("a", "a2", t0.Add(-2*time.Second))
	// Back, but not for minStartedSeconds yet: b waits; look again when a has run 5 s.
	expect(t, w.eval(), "a=Recreating(killed) b=Pending wake +3s")
	expect(t, w.msg("a"), "container a2 started, waiting for minStartedSeconds (5s)")
	w.now = w.now.Add(3 * time.Second)
	expect(t, w.eval(), "a=Succeeded(killed) b=Pending stop b:b1")
}

func TestPlanAlreadyRestarted(t *testing.T) {
	w := newWorld(nil)
	w.running("a", "a2", t0.Add(-time.Minute)) // restarted on its own after the request was made
	expect(t, w.eval(), "a=Succeeded b=Pending stop b:b1")
	expect(t, w.msg("a"), "")
	expect(t, w.recreated(), "a:a2(self)")

	// The runtime knows first: a restart the pod status does not show yet is not stopped either.
	w = newWorld(nil)
	w.rt["a"] = prober.ContainerStatus{ID: "a2", Running: true, StartedAt: t0}
	expect(t, w.eval(), "a=Recreating b=Pending stop b:b1")

	// forceRecreate stops the instance that runs now, whatever it is.
	w = newWorld(func(s *v1alpha1.ContainerRecreateRequestStrategy) { s.ForceRecreate = true })
	w.running("a", "a2", t0.Add(-time.Minute))
	expect(t, w.eval(), "a=Pending b=Pending stop a:a2+preStop stop b:b1")
	w.killed("a")
	w.running("a", "a3", t0)
	expect(t, w.eval(), "a=Succeeded(killed) b=Pending stop b:b1")
}

// After a restart of the node service the request's record is all there is.
func TestPlanAfterServiceRestart(t *testing.T) {
	// Stopped and already back: followed, never stopped again.
	w := newWorld(nil)
	w.state("a").IsKilled, w.state("a").Phase = true, v1alpha1.ContainerRecreateRequestRecreating
	w.running("a", "a2", t0)
	expect(t, w.eval(), "a=Succeeded(killed) b=Pending stop b:b1")

	// Recorded as killed but the same instance still runs: the service died during the stop.
	// Finish that stop (same ID), once; no preStop again.
	w = newWorld(nil)
	w.state("a").IsKilled, w.state("a").Phase = true, v1alpha1.ContainerRecreateRequestRecreating
	expect(t, w.eval(), "a=Recreating(killed) b=Pending stop a:a1(resume) stop b:b1")
	// Not started (e.g. the status write lost a race): decided again.
	expect(t, w.eval(), "a=Recreating(killed) b=Pending stop a:a1(resume) stop b:b1")
	w.mem["a"].resumed, w.mem["b"].inFlight = true, true // started
	expect(t, w.eval(), "a=Recreating(killed) b=Recreating")
	w.rt["a"] = prober.ContainerStatus{ID: "a1"} // stopped
	expect(t, w.eval(), "a=Recreating(killed) b=Recreating")
}

func TestPlanFailures(t *testing.T) {
	// The new instance exits: Failed with the reason; failurePolicy Fail ends the request and
	// nothing else is stopped.
	w := newWorld(func(s *v1alpha1.ContainerRecreateRequestStrategy) { s.OrderedRecreate = true })
	w.eval()
	w.mem["a"].inFlight = true
	w.killed("a")
	w.api["a"] = &corev1.ContainerStatus{Name: "a", ContainerID: "containerd://a2",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://a2", ExitCode: 1, Reason: "Error"}}}
	expect(t, w.eval(), `a=Failed(killed) b=Failed complete "failed a (recreated container a2 exited: Error, exit code 1), b (not recreated: container a failed and the failurePolicy is Fail)"`)

	// Ignore goes on with the next.
	w = newWorld(func(s *v1alpha1.ContainerRecreateRequestStrategy) {
		s.OrderedRecreate, s.FailurePolicy = true, v1alpha1.ContainerRecreateRequestFailurePolicyIgnore
	})
	w.eval()
	w.mem["a"].inFlight = false
	w.mem["a"].stopErr = "rpc error: code = Unknown desc = boom"
	expect(t, w.eval(), "a=Failed b=Pending stop b:b1")
	expect(t, w.msg("a"), "stopping the container failed: rpc error: code = Unknown desc = boom")

	// A pod that does not restart containers.
	w = newWorld(nil)
	w.pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	w.eval()
	w.killed("a")
	w.killed("b")
	w.api["a"].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ContainerID: "containerd://a1", ExitCode: 143}}
	expect(t, w.eval(), "a=Failed(killed) b=Recreating(killed)")
	expect(t, w.msg("a"), "stopped, but the pod's restartPolicy Never does not restart it")

	// Fail stops new kills but lets a stop already recorded finish and be followed.
	w = newWorld(nil)
	w.state("a").IsKilled = true
	w.state("b").Phase, w.state("b").Message = v1alpha1.ContainerRecreateRequestFailed, "x"
	expect(t, w.eval(), "a=Recreating(killed) b=Failed stop a:a1(resume)")
}

func TestPlanContainerNotFound(t *testing.T) {
	w := newWorld(nil)
	delete(w.rt, "b")
	delete(w.api, "b")
	expect(t, w.eval(), "a=Pending b=Pending stop a:a1+preStop wake +1m0s")
	expect(t, w.msg("b"), "container not found on the node")
	w.mem["a"].inFlight = true
	w.now = w.now.Add(time.Minute)
	expect(t, w.eval(), "a=Recreating b=Failed")
	expect(t, w.msg("b"), "container not found on the node for 1m0s")
	// The pod status alone is enough to know the instance.
	w = newWorld(nil)
	delete(w.rt, "b")
	expect(t, w.eval(), "a=Pending b=Pending stop a:a1+preStop stop b:b1")
	// A stopped container gets no preStop hook (it would fail) but is still recorded and stopped.
	w = newWorld(nil)
	w.rt["a"] = prober.ContainerStatus{ID: "a1"}
	expect(t, w.eval(), "a=Pending b=Pending stop a:a1 stop b:b1")
}

func TestRestarts(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure,
		InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: &always}}}}
	for _, tc := range []struct {
		container string
		code      int32
		want      bool
	}{{"main", 143, true}, {"main", 0, false}, {"sidecar", 0, true}} {
		if got := restarts(pod, tc.container, tc.code); got != tc.want {
			t.Errorf("restarts(%s, %d) = %v", tc.container, tc.code, got)
		}
	}
}

func TestGrace(t *testing.T) {
	crr := &v1alpha1.ContainerRecreateRequest{}
	pod := &corev1.Pod{}
	if g := graceOf(crr, pod); g != 30*time.Second {
		t.Errorf("default %v", g)
	}
	five, zero := int64(5), int64(0)
	pod.Spec.TerminationGracePeriodSeconds = &five
	if g := graceOf(crr, pod); g != 5*time.Second {
		t.Errorf("pod's %v", g)
	}
	crr.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{TerminationGracePeriodSeconds: &zero}
	if g := graceOf(crr, pod); g != 0 {
		t.Errorf("request's %v (the 2 s floor is the stop's)", g)
	}
}
