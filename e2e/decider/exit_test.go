// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/e2e/framework"
)

// aliveCondition is the pod condition of the marker the exit scenario puts on its pods.
const aliveCondition = "example.com/alive"

// An exit is not a failed probe: PID 1 of a probed container (enhanced liveness that always
// succeeds, and a marker) is killed several times in a row, each kill but the first landing after
// the kubelet's back-off. No probe state is ever Failed, the marker's condition never False, no
// KruiseProbeFailed or decider event, no request: the restart count is exactly the kubelet's, one
// per kill. Under the shipped configuration it runs beside the other default-configuration
// scenarios; testExitZeroWindow repeats it with a zero observation window.
func (s *suite) testExit(t *testing.T) {
	t.Parallel()
	s.exitScenario(t, "exits")
}

func (s *suite) testExitZeroWindow(t *testing.T) {
	s.withConfig(t, s.config(t, "circuitBreaker: {window: 0s}"))
	s.exitScenario(t, "exits-now")
}

// exitScenario kills the container of a pod named name three times, in a namespace of its own
// with a marker of its own, and checks that nothing read an exit as a failed probe.
func (s *suite) exitScenario(t *testing.T, name string) {
	const kills = 3
	ns := s.c.Namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	marker := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alive"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"exit-test": "true"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "alive", ContainerName: appContainer, PodConditionType: aliveCondition,
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
					PeriodSeconds: 1, TimeoutSeconds: probeTimeout, SuccessThreshold: 1, FailureThreshold: 1}},
			}},
		},
	}
	if err := s.c.Client.Create(ctx, marker); err != nil {
		t.Fatalf("create PodProbeMarker: %v", err)
	}
	seen, err := watchExits(ctx, s, ns)
	if err != nil {
		t.Fatal(err)
	}

	pod := appPod(ns, name, true, execLivenessProbe(failMarker)) // the marker file is never made
	pod.Labels["exit-test"] = "true"
	p := s.barePod(t, pod)
	s.waitMarker(t, p, corev1.ConditionTrue)
	for i := int32(1); i <= kills; i++ {
		t0 := time.Now()
		// The exec's own stream may break as the container dies; the restart is the proof.
		_, _, _ = s.c.Exec(framework.Context(t, time.Minute), ns, p.Name, appContainer, "kill", "1")
		p = s.waitRestarts(t, p, i, 3*time.Minute)
		s.waitProbe(t, p, v1alpha1.ProbeSucceeded)
		s.waitMarker(t, p, corev1.ConditionTrue)
		t.Logf("%s: kill %d, back to Ready with liveness Succeeded in %s", p.Name, i, time.Since(t0).Round(100*time.Millisecond))
	}
	// The decider has its window and more (5 s) to act on a stale state: it must not restart.
	err = framework.Never(framework.Context(t, time.Minute), 5*time.Second, "a restart by the decider", func(context.Context) (bool, string, error) {
		got := restarts(s.pod(t, p))
		return got != kills, fmt.Sprintf("restartCount %d after %d kills, want exactly the kubelet's %d", got, kills, kills), nil
	})
	if err != nil {
		t.Errorf("%s: %v\n%s", p.Name, err, s.explain(p))
	}
	s.checkNoFailure(t, p, seen)
	s.crrs.check(t)
}

// exitLog is what the exit scenario's watches saw: every Failed probe state and every False
// marker condition of the namespace's pods, however briefly.
type exitLog struct {
	mu     sync.Mutex
	failed []string
	err    error
}

func (l *exitLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed = append(l.failed, fmt.Sprintf(format, args...))
}

// watchExits watches the node's NodePodProbe and the namespace's pods until ctx ends. A
// one-second Failed between two polls would be missed; a watch sees every write.
func watchExits(ctx context.Context, s *suite, ns string) (*exitLog, error) {
	l := &exitLog{}
	wc, err := client.NewWithWatch(s.c.Config, client.Options{Scheme: s.c.Scheme})
	if err != nil {
		return nil, err
	}
	nw, err := wc.Watch(ctx, &v1alpha1.NodePodProbeList{}, client.MatchingFields{"metadata.name": s.c.Rig.NodeName()})
	if err != nil {
		return nil, err
	}
	pw, err := s.c.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		nw.Stop()
		return nil, err
	}
	fail := func(err error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err == nil && ctx.Err() == nil {
			l.err = err
		}
	}
	go func() {
		defer nw.Stop()
		for ev := range nw.ResultChan() {
			npp, ok := ev.Object.(*v1alpha1.NodePodProbe)
			if !ok {
				continue
			}
			for _, ps := range npp.Status.PodProbeStatuses {
				if ps.Namespace != ns {
					continue
				}
				for _, st := range ps.ProbeStates {
					if st.State == v1alpha1.ProbeFailed {
						l.add("%s %s: NodePodProbe state Failed %q at %s", ps.Name, st.Name, st.Message, time.Now().Format(time.StampMilli))
					}
				}
			}
		}
		fail(fmt.Errorf("the NodePodProbe watch ended early"))
	}()
	go func() {
		defer pw.Stop()
		for ev := range pw.ResultChan() {
			if ev.Type == watch.Error {
				fail(fmt.Errorf("the pod watch failed: %v", ev.Object))
				return
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == aliveCondition && c.Status == corev1.ConditionFalse {
					l.add("%s: condition %s False %q at %s", p.Name, c.Type, c.Message, time.Now().Format(time.StampMilli))
				}
			}
		}
		fail(fmt.Errorf("the pod watch ended early"))
	}()
	return l, nil
}

// waitMarker waits for the pod's marker condition to have status.
func (s *suite) waitMarker(t testing.TB, pod *corev1.Pod, status corev1.ConditionStatus) {
	t.Helper()
	_, err := s.c.WaitForPod(framework.Context(t, 2*time.Minute), pod.Namespace, pod.Name, time.Minute,
		fmt.Sprintf("condition %s %s", aliveCondition, status), func(p *corev1.Pod) bool {
			for _, c := range p.Status.Conditions {
				if c.Type == aliveCondition {
					return c.Status == status
				}
			}
			return false
		})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(pod))
	}
}

// checkNoFailure: nothing read the pod's exits as a failed probe.
func (s *suite) checkNoFailure(t *testing.T, pod *corev1.Pod, l *exitLog) {
	t.Helper()
	l.mu.Lock()
	failed, err := append([]string(nil), l.failed...), l.err
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range failed {
		if strings.HasPrefix(f, pod.Name+" ") || strings.HasPrefix(f, pod.Name+":") {
			t.Errorf("an exit read as a failure: %s", f)
		}
	}
	evs, err := s.c.Events(framework.Context(t, 30*time.Second), pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		switch e.Reason {
		case v1alpha1.EventReasonProbeFailed, decider.EventReasonRestart, decider.EventReasonHeld,
			decider.EventReasonDryRun, decider.EventReasonRestartFailed:
			t.Errorf("event %s on %s: %s", e.Reason, pod.Name, e.Message)
		}
	}
	if got := s.crrs.created(pod.Namespace, pod.Name); len(got) != 0 {
		t.Errorf("%d ContainerRecreateRequests for %s's exits: %s", len(got), pod.Name, s.crrs.describe(pod.Namespace))
	}
}
