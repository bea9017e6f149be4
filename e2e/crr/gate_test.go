// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package crr

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// A pod not created by an OpenKruise workload opts in with a label: admission adds the
// KruisePodReady gate, the cluster deployment opens it (the test never touches the condition), a
// request with unreadyGracePeriodSeconds makes the pod not ready before its container is stopped,
// and the pod is ready again after the container was recreated.
func (s *suite) injectedGate(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := framework.NewPod(ns, "opted-in", trap("b"))
	pod.Labels[v1alpha1.LabelKruisePodReadinessGate] = "true"
	pod = s.c.CreatePod(t, pod)
	if len(pod.Spec.ReadinessGates) != 1 || pod.Spec.ReadinessGates[0].ConditionType != kruisePodReady {
		t.Fatalf("readiness gates %+v, want the KruisePodReady gate added at admission", pod.Spec.ReadinessGates)
	}
	t0 := time.Now()
	pod = s.c.WaitForPodReady(t, pod, 2*time.Minute)
	if framework.PodCondition(pod, kruisePodReady) != corev1.ConditionTrue {
		t.Fatalf("ready without KruisePodReady True: %+v", pod.Status.Conditions)
	}
	t.Logf("ready with the gate open %v after creation", time.Since(t0).Round(time.Millisecond))
	b1 := status(pod, "b")

	readiness := s.watchReadiness(t, pod)
	crr := s.create(t, pod, "drain", []string{"b"}, strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) {
		st.UnreadyGracePeriodSeconds = ptr.To[int64](2)
	}))
	expectStates(t, s.waitCompleted(t, crr, time.Minute), "b=Succeeded(killed)")
	stopped := s.stoppedAt(t, b1.ContainerID)
	s.restarted(t, pod, "b", b1.RestartCount+1, time.Minute)
	_, err := s.c.WaitForPod(framework.Context(t, time.Minute), ns, pod.Name, 30*time.Second, "ready again", func(p *corev1.Pod) bool {
		return framework.PodReady(p) && framework.PodCondition(p, kruisePodReady) == corev1.ConditionTrue
	})
	if err != nil {
		t.Fatal(err)
	}
	unreadyAt, readyAgainAt := readiness()
	if unreadyAt.IsZero() || !unreadyAt.Before(stopped) {
		t.Fatalf("the pod was not made not ready before b stopped (not ready at %v, stopped at %v)", unreadyAt, stopped)
	}
	// The 2 s grace counts from when the pod was made not ready; room for the 50 ms poll.
	if d := stopped.Sub(unreadyAt); d < 1500*time.Millisecond {
		t.Errorf("b stopped %v after the pod went not ready, want the 2 s unready grace", d)
	}
	if readyAgainAt.IsZero() || readyAgainAt.Before(stopped) {
		t.Errorf("ready again at %v, b stopped at %v", readyAgainAt, stopped)
	}
	t.Logf("not ready %v before b stopped, ready again %v after", stopped.Sub(unreadyAt).Round(time.Millisecond),
		readyAgainAt.Sub(stopped).Round(time.Millisecond))
}
