// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

// testKubeletHeartbeat: node B's service on the kubelet's own identity (system:node:<B>, the
// default install), which NodeRestriction keeps from writing its Lease, has the Lease renewed by
// the cluster deployment's heartbeat endpoint (through the webhook Service's cluster IP and
// kube-proxy, authenticated by its client certificate); `probeshim status` says so. Killed, the
// node goes silent after the grace (marker conditions Unknown, marks removed); started again, its
// results flow.
func (s *suite) testKubeletHeartbeat(t *testing.T) {
	s.setGrace(t, testGrace)
	ns := s.c.Namespace(t)
	gsB := s.markerPod(t, ns, "gs-kubelet-b", s.b)
	s.createMarker(t, idleMarker(ns))

	s.svcB.Stop()
	t.Cleanup(func() { s.svcB.Start(t) })     // the suite's dedicated identity again
	svc := s.c.StartNodeServiceOn(t, s.b, "") // the kubelet's identity
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node service of %s on the kubelet's identity (end of log):\n%s", s.b.Name(), logtail.Last(svc.Logs(), 40))
		}
	})
	// The first renewal is due a period after the service is synced, and goes through the
	// endpoint once the API server refused the kubelet's identity the Lease.
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), 6*renewPeriod, "probeshim status: renewing through the endpoint",
		func(ctx context.Context) (bool, string, error) {
			st, err := svc.Status(ctx)
			if err != nil || st.Heartbeat == nil {
				return false, fmt.Sprint(err), nil
			}
			hb := st.Heartbeat
			return hb.Renewing && strings.HasPrefix(hb.Path, "endpoint https://"), fmt.Sprintf("%+v", *hb), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	s.waitLeaseRenewed(t, s.b.Name())
	// Written by the deployment's relay, not by the node itself.
	l, err := s.c.Kube.CoordinationV1().Leases(leaseNamespace).Get(framework.Context(t, time.Minute), s.b.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if by := lastUpdater(l.ManagedFields); !strings.HasPrefix(by, "probeshim-cluster") {
		t.Errorf("Lease %s last written by %q, want the cluster deployment (probeshim-cluster)", s.b.Name(), by)
	}
	s.waitIdle(t, gsB, corev1.ConditionTrue)

	svc.Kill()
	stopped := time.Now()
	p, err := s.c.WaitForPod(framework.Context(t, 3*time.Minute), ns, gsB.Name, testGrace+renewPeriod+waitMarks, conditionIdle+" Unknown, label removed",
		func(p *corev1.Pod) bool {
			c := condition(p, conditionIdle)
			_, labelled := p.Labels[labelIdle]
			return c != nil && c.Status == corev1.ConditionUnknown && !labelled
		})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(gsB))
	}
	t.Logf("kubelet identity: %s Unknown %s after the service was killed: %q", gsB.Name, time.Since(stopped).Round(time.Second), condition(p, conditionIdle).Message)
	if msg := condition(p, conditionIdle).Message; !strings.Contains(strings.ToLower(msg), silentMessageWords) {
		t.Errorf("the Unknown condition's message does not say the node service is silent: %q", msg)
	}

	svc.Start(t)
	s.waitIdle(t, gsB, corev1.ConditionTrue)
	svc.Stop()
}

// lastUpdater is the manager of the newest Update entry of managed fields.
func lastUpdater(fields []metav1.ManagedFieldsEntry) string {
	var by string
	var at time.Time
	for _, f := range fields {
		if f.Operation == metav1.ManagedFieldsOperationUpdate && f.Time != nil && !f.Time.Time.Before(at) {
			by, at = f.Manager, f.Time.Time
		}
	}
	return by
}
