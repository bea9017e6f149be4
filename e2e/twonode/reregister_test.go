// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// Node B's Node object is deleted: its NodePodProbe goes with it. Its kubelet registers it again
// (a kubelet registers only when it starts, so it is restarted): a new NodePodProbe, owned by the
// new Node, probes B's pod again and B's node service writes the results, with no container
// restarted. Node A is untouched throughout.
func (s *suite) testReregister(t *testing.T) {
	ns := s.c.Namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	gsA := s.markerPod(t, ns, "gs-a", s.a)
	gsB := s.markerPod(t, ns, "gs-b", s.b)
	s.createMarker(t, idleMarker(ns))
	s.waitIdle(t, gsA, corev1.ConditionTrue)
	s.waitIdle(t, gsB, corev1.ConditionTrue)
	oldNode, err := s.c.Kube.CoreV1().Nodes().Get(ctx, s.b.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldNPP := s.waitNPP(t, s.b.Name())

	t0 := time.Now()
	if err := s.c.Kube.CoreV1().Nodes().Delete(ctx, s.b.Name(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, time.Minute, "NodePodProbe "+s.b.Name()+" deleted with its node", func(ctx context.Context) (bool, string, error) {
		npp, err := s.npp(ctx, s.b.Name())
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return npp.UID != oldNPP.UID, fmt.Sprintf("uid %s, deleting %v", npp.UID, npp.DeletionTimestamp != nil), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("NodePodProbe %s gone %s after its Node", s.b.Name(), time.Since(t0).Round(time.Millisecond))

	if err := s.c.Rig.RestartKubelet(ctx, s.b); err != nil {
		t.Fatal(err)
	}
	newNode, err := s.c.Kube.CoreV1().Nodes().Get(ctx, s.b.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if newNode.UID == oldNode.UID {
		t.Fatalf("node %s kept its UID %s: it was not registered anew", s.b.Name(), newNode.UID)
	}
	t.Logf("node %s registered again %s after its deletion", s.b.Name(), time.Since(t0).Round(time.Millisecond))
	var npp *v1alpha1.NodePodProbe
	err = framework.WaitFor(ctx, time.Minute, "a new NodePodProbe "+s.b.Name()+" owned by the new Node, with "+gsB.Name+"'s result", func(ctx context.Context) (bool, string, error) {
		var err error
		npp, err = s.npp(ctx, s.b.Name())
		if err != nil {
			return false, err.Error(), nil
		}
		owned := false
		for _, ref := range npp.OwnerReferences {
			owned = owned || ref.Kind == "Node" && ref.UID == newNode.UID
		}
		spec, status := nppPods(npp, ns)
		st := probeState(npp, gsB, idleProbe)
		return npp.UID != oldNPP.UID && owned && len(spec) == 1 && st.State == v1alpha1.ProbeSucceeded,
			fmt.Sprintf("uid %s, owners %v, spec %v, status %v, %s %q", npp.UID, npp.OwnerReferences, spec, status, idleProbe, st.State), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(gsB))
	}
	t.Logf("new NodePodProbe %s with results %s after the Node's deletion", s.b.Name(), time.Since(t0).Round(time.Millisecond))

	// The heartbeat follows: B's Lease, deleted with the old Node, is renewed again and owned by the
	// new Node, and the new NodePodProbe records the node service as Live.
	err = framework.WaitFor(ctx, time.Minute, "Lease "+leaseNamespace+"/"+s.b.Name()+" renewed and owned by the new Node", func(ctx context.Context) (bool, string, error) {
		lease, err := s.c.Kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, s.b.Name(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		owned := false
		for _, ref := range lease.OwnerReferences {
			owned = owned || ref.Kind == "Node" && ref.UID == newNode.UID
		}
		fresh := lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(newNode.CreationTimestamp.Time)
		npp, err := s.npp(ctx, s.b.Name())
		if err != nil {
			return false, err.Error(), nil
		}
		state := npp.Annotations[v1alpha1.AnnotationNodeService]
		return owned && fresh && state == v1alpha1.NodeServiceLive,
			fmt.Sprintf("owners %v, renewed %v, NodePodProbe says %q", lease.OwnerReferences, lease.Spec.RenewTime, state), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Lease %s renewed under the new Node %s after its deletion", s.b.Name(), time.Since(t0).Round(time.Millisecond))

	// Results flow again, both ways, on B; A never changed.
	s.setIdle(t, gsB, false)
	s.waitIdle(t, gsB, corev1.ConditionFalse)
	s.setIdle(t, gsB, true)
	s.waitIdle(t, gsB, corev1.ConditionTrue)
	if p := s.pod(t, gsA); !idleIs(p, corev1.ConditionTrue) {
		t.Errorf("node A's pod changed: %s", describeIdle(p))
	}
	for _, p := range []*corev1.Pod{gsA, gsB} {
		if n := restarts(s.pod(t, p), markerCtr); n != 0 {
			t.Errorf("pod %s restarted %d times, want 0", p.Name, n)
		}
	}
}
