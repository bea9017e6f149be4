// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/e2e/framework"
)

// Node B's service stopped three ways — SIGSTOP (hung), SIGKILL (crashed), its credentials
// revoked — while node A's goes on: B's pod keeps the last result B wrote, A's results keep
// flowing, and once B's service is back (continued, started again, or given valid credentials)
// B's results flow again without any container restarted.
//
// What the cluster part does about a silent service (issue 16: after --node-service-grace the
// node's marker conditions go Unknown, the decider holds restarts there) is heartbeat_test.go's.
func (s *suite) testSilentService(t *testing.T) {
	ns := s.c.Namespace(t)
	gsA := s.markerPod(t, ns, "gs-a", s.a)
	gsB := s.markerPod(t, ns, "gs-b", s.b)
	s.createMarker(t, idleMarker(ns))
	s.waitIdle(t, gsA, corev1.ConditionTrue)
	s.waitIdle(t, gsB, corev1.ConditionTrue)
	idle := map[bool]corev1.ConditionStatus{true: corev1.ConditionTrue, false: corev1.ConditionFalse}

	// silent flips both pods' probes to next while B's service is silent: A's marks follow, B's
	// keep the last result, for as long again as A's took and a few probe periods more.
	silent := func(next bool) {
		t.Helper()
		t0 := time.Now()
		s.setIdle(t, gsB, next)
		s.setIdle(t, gsA, next)
		s.waitIdle(t, gsA, idle[next])
		s.checkIdleStays(t, gsB, idle[!next], time.Since(t0)+5*time.Second)
	}
	back := func(next bool) {
		t.Helper()
		s.waitIdle(t, gsB, idle[next])
	}

	svc := s.svcB
	t.Log("SIGSTOP")
	if err := svc.Pause(); err != nil {
		t.Fatal(err)
	}
	silent(false)
	if err := svc.Resume(); err != nil {
		t.Fatal(err)
	}
	back(false)

	t.Log("SIGKILL")
	svc.Kill()
	silent(true)
	svc.Start(t)
	back(true)

	t.Log("credentials revoked")
	user, groups := framework.DedicatedNodeUser(s.b.Name())
	kc, err := s.c.Rig.RevocableKubeconfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	svc.Stop()
	revocable := s.c.StartNodeServiceOn(t, s.b, kc)
	s.setIdle(t, gsB, false)
	s.waitIdle(t, gsB, corev1.ConditionFalse) // the revocable identity works
	if err := s.c.Rig.RevokeCredentials(framework.Context(t, 3*time.Minute), user); err != nil {
		t.Fatal(err)
	}
	silent(true)
	// Valid credentials again: B's usual service.
	revocable.Stop()
	if strings.Contains(revocable.Logs(), "panic") {
		t.Errorf("the node service with revoked credentials panicked:\n%s", revocable.Logs())
	}
	svc.Start(t)
	back(true)

	for _, p := range []*corev1.Pod{gsA, gsB} {
		if n := restarts(s.pod(t, p), markerCtr); n != 0 {
			t.Errorf("pod %s restarted %d times, want 0", p.Name, n)
		}
	}
}

// checkIdleStays fails the test if the idle marks of p leave want within d for anything but the
// cluster part's Unknown of a silent node: on a loaded machine d can outlast --node-service-grace
// (40 s here), and the grace's end is heartbeat_test.go's to check, not this test's.
func (s *suite) checkIdleStays(t testing.TB, p *corev1.Pod, want corev1.ConditionStatus, d time.Duration) {
	t.Helper()
	ctx := framework.Context(t, d+time.Minute)
	var changed string
	_ = framework.WaitFor(ctx, d, "", func(ctx context.Context) (bool, string, error) {
		cur, err := s.c.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", nil
		}
		if !idleIs(cur, want) && !silentUnknown(cur) {
			changed = describeIdle(cur)
			return true, "", nil
		}
		return false, "", nil
	})
	if changed != "" {
		t.Errorf("%s changed while its node service was silent: %s", p.Name, changed)
	}
}

// silentUnknown reports whether p's idle condition is the cluster part's Unknown for a silent node.
func silentUnknown(p *corev1.Pod) bool {
	c := condition(p, conditionIdle)
	return c != nil && c.Status == corev1.ConditionUnknown && strings.Contains(strings.ToLower(c.Message), silentMessageWords)
}
