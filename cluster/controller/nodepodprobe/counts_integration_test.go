// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// A marker in dry run is placed like any other; its annotations count the results the node
// services report and the matched pods no node service probes, by reason, and follow a node
// becoming served.
func TestMarkerCounts(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	served, unserved, virtual := env.Node(t, true), env.Node(t, true), env.Node(t, true)
	label := func(n *corev1.Node, k, v string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, k, v)
		if err := env.Client.Patch(ctx, n, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	label(served, v1alpha1.LabelNodeServed, "true")
	label(virtual, "type", "virtual-kubelet")

	lbls := map[string]string{"app": "game"}
	a := env.RunningPod(t, newPod(ns, "a", served.Name, lbls), "10.9.0.1")
	b := env.RunningPod(t, newPod(ns, "b", served.Name, lbls), "10.9.0.2")
	env.RunningPod(t, newPod(ns, "c", unserved.Name, lbls), "10.9.0.3")
	env.RunningPod(t, newPod(ns, "d", virtual.Name, lbls), "10.9.0.4")
	m := newMarker(ns, "m", lbls, tcpProbe("idle", "game"))
	m.Annotations = map[string]string{v1alpha1.AnnotationDryRun: "true"}
	create(t, m)

	poll.Eventually(t, wait, specIs(served.Name, "a@10.9.0.1:m#idle b@10.9.0.2:m#idle"))
	npp := getNPP(t, served.Name)
	now := metav1.Now()
	npp.Status.PodProbeStatuses = []v1alpha1.PodProbeStatus{
		{Namespace: ns, Name: "a", UID: string(a.UID), ProbeStates: []v1alpha1.ContainerProbeState{{Name: "m#idle", State: v1alpha1.ProbeSucceeded, LastProbeTime: now}}},
		{Namespace: ns, Name: "b", UID: string(b.UID), ProbeStates: []v1alpha1.ContainerProbeState{{Name: "m#idle", State: v1alpha1.ProbeFailed, LastProbeTime: now}}},
	}
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		t.Fatal(err)
	}

	annotations := func(want map[string]string) func() error {
		return func() error {
			got := &v1alpha1.PodProbeMarker{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
				return err
			}
			for k, v := range want {
				if have, ok := got.Annotations[k]; have != v || ok != (v != "") {
					return fmt.Errorf("annotation %s = %q (present %v), want %q", k, have, ok, v)
				}
			}
			if got.Status.MatchedPods != 4 {
				return fmt.Errorf("matchedPods = %d, want 4", got.Status.MatchedPods)
			}
			return nil
		}
	}
	// c and d are placed (their nodes are Ready) but nobody reports: Unknown, and unprobed.
	poll.Eventually(t, wait, annotations(map[string]string{
		v1alpha1.AnnotationResults:         `{"idle":{"Succeeded":1,"Failed":1,"Unknown":2,"Error":0}}`,
		v1alpha1.AnnotationResultsSummary:  "Succeeded=1 Failed=1 Unknown=2 Error=0",
		v1alpha1.AnnotationUnprobed:        "2",
		v1alpha1.AnnotationUnprobedReasons: "NodeNotServed=1,VirtualNode=1",
		v1alpha1.AnnotationDryRun:          "true",
	}))

	// A probe that cannot run counts as an error; a node service starting serves its node's pods.
	npp = getNPP(t, served.Name)
	npp.Status.PodProbeStatuses[1].ProbeStates[0] = v1alpha1.ContainerProbeState{Name: "m#idle", State: v1alpha1.ProbeUnknown,
		Message: v1alpha1.ProbeErrorMessage("ConnectionRefused", "dial tcp"), LastProbeTime: now}
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		t.Fatal(err)
	}
	label(unserved, v1alpha1.LabelNodeServed, "true")
	poll.Eventually(t, wait, annotations(map[string]string{
		v1alpha1.AnnotationResultsSummary:  "Succeeded=1 Failed=0 Unknown=2 Error=1",
		v1alpha1.AnnotationUnprobed:        "1",
		v1alpha1.AnnotationUnprobedReasons: "VirtualNode=1",
	}))
}
