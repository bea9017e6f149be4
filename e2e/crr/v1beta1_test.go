// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package crr

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1beta1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// A request written as OpenKruise's next API, apps.kruise.io/v1beta1, through the deployed
// cluster part's conversion webhook (the Service, the caBundle the deployment set on the CRD):
// admitted as v1alpha1 is, carried out by the node, and read back as v1beta1 with the grace as
// the PreRecreateGrace condition.
func (s *suite) v1beta1(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "beta", 1, func(p *corev1.Pod) {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: kruisePodReady}}
	}, trap("main"))
	s.setGate(t, pod, corev1.ConditionTrue)
	pod = s.c.WaitForPodReady(t, pod, time.Minute)
	before := status(pod, "main")

	crr := &v1beta1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "beta"},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name,
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}},
			Strategy:   &v1alpha1.ContainerRecreateRequestStrategy{UnreadyGracePeriodSeconds: ptr.To[int64](1)}},
	}
	if err := s.c.Client.Create(framework.Context(t, 30*time.Second), crr); err != nil {
		t.Fatalf("creating a v1beta1 ContainerRecreateRequest: %v", err)
	}
	if sc := crr.Spec.Containers[0].StatusContext; sc == nil || sc.ContainerID != before.ContainerID {
		t.Errorf("admission did not complete the v1beta1 request from the pod: statusContext %+v", sc)
	}

	cur := &v1beta1.ContainerRecreateRequest{}
	err := framework.WaitFor(framework.Context(t, 90*time.Second), time.Minute, "beta Completed, read as v1beta1", func(ctx context.Context) (bool, string, error) {
		if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(crr), cur); err != nil {
			return false, err.Error(), nil
		}
		return cur.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted, string(cur.Status.Phase), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := cur.Status.ContainerRecreateStates; len(st) != 1 || st[0].Phase != v1alpha1.ContainerRecreateRequestSucceeded || !st[0].IsKilled {
		t.Errorf("container states %+v, want main Succeeded and killed", st)
	}
	grace := meta.FindStatusCondition(cur.Status.Conditions, v1beta1.ConditionPreRecreateGrace)
	if grace == nil || grace.Status != metav1.ConditionTrue || grace.LastTransitionTime.After(cur.Status.CompletionTime.Time) {
		t.Errorf("conditions %+v, want PreRecreateGrace True, from before the completion at %s", cur.Status.Conditions, cur.Status.CompletionTime)
	}
	if m := status(s.pod(t, pod), "main"); m.ContainerID == before.ContainerID || m.RestartCount != before.RestartCount+1 {
		t.Errorf("main after: %s restartCount %d, want a new container", m.ContainerID, m.RestartCount)
	}
}
