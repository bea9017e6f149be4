// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/e2e/framework"
)

// startupDelay is how long the startup-hold scenario's container takes to pass its startup probe.
const startupDelay = 20 * time.Second

// Enhanced liveness waits for the startup probe, as the kubelet's liveness probe does: a container
// whose startupProbe passes only after startupDelay, with a liveness probe that fails from its
// first second, is not restarted (no request, restartCount 0) while the kubelet reports it not
// started; once started, the failing probe gets it restarted. Without the hold the first failure,
// a second or two after the container started, would restart it long before startupDelay.
func (s *suite) testStartupHold(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	p := appPod(ns, "slow-start", true, &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
		PeriodSeconds: 1, TimeoutSeconds: probeTimeout, SuccessThreshold: 1, FailureThreshold: 1,
	})
	app := &p.Spec.Containers[0]
	app.Command = []string{"sh", "-c", fmt.Sprintf("trap 'exit 0' TERM; sleep %d & wait $!; touch /tmp/started; %s",
		int(startupDelay.Seconds()), appScript)}
	app.StartupProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-e", "/tmp/started"}}},
		PeriodSeconds: 1, TimeoutSeconds: probeTimeout, FailureThreshold: 120,
	}
	pod := s.c.CreatePod(t, p)
	if pod.Spec.Containers[0].LivenessProbe != nil {
		t.Fatal("the liveness probe was left to the kubelet: the pod was not admitted for enhanced liveness")
	}

	// Every look before the kubelet reports the container started: not restarted, no request.
	var runningAt, startedAt time.Time
	err := framework.WaitFor(framework.Context(t, 3*time.Minute), 2*time.Minute, "app started", func(ctx context.Context) (bool, string, error) {
		cur, err := s.c.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		cs := framework.ContainerStatus(cur, appContainer)
		if cs == nil {
			return false, "no status", nil
		}
		if cs.Started != nil && *cs.Started {
			startedAt = time.Now()
			return true, "", nil
		}
		if cs.State.Running != nil && runningAt.IsZero() {
			runningAt = time.Now()
		}
		if cs.RestartCount != 0 {
			return false, "", fmt.Errorf("restarted (restartCount %d) before its startup probe passed\n%s", cs.RestartCount, s.explain(pod))
		}
		if got := s.crrs.created(ns, pod.Name); len(got) != 0 {
			return false, "", fmt.Errorf("a ContainerRecreateRequest (%s) before the container started\n%s", got[0].crr.Name, s.explain(pod))
		}
		return false, fmt.Sprintf("running %t, not started", cs.State.Running != nil), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if runningAt.IsZero() || startedAt.Sub(runningAt) < startupDelay/2 {
		t.Fatalf("the container ran %v before it started (seen running at %v), want about %v: the hold was not exercised",
			startedAt.Sub(runningAt), runningAt, startupDelay)
	}

	// Started: the probe that failed all along now counts, and restarts it.
	got := s.waitCreated(t, pod, 1, waitRestart)
	s.waitRestarts(t, pod, 1, waitRestart)
	t.Logf("running %v before the startup probe passed, no restart meanwhile; first request %v after it",
		startedAt.Sub(runningAt).Round(100*time.Millisecond), got[0].at.Sub(startedAt).Round(100*time.Millisecond))
}
