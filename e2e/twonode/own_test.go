// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

// Marker and enhanced-liveness pods on both nodes: each node's NodePodProbe holds exactly its own
// pods, each node service probes exactly those and writes their results, a result changing on one
// node changes that pod alone, and a failing liveness probe on node B restarts B's container
// through a request for node B, which node B carries out.
func (s *suite) testOwnPods(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	gs := map[string]*corev1.Pod{}
	live := map[string]*corev1.Pod{}
	for _, n := range []*rig.Node{s.a, s.b} {
		gs[n.Name()] = s.markerPod(t, ns, "gs-"+n.Name(), n)
		live[n.Name()] = s.livePod(t, ns, "live-"+n.Name(), n)
	}
	s.createMarker(t, idleMarker(ns))
	for _, p := range gs {
		s.waitIdle(t, p, corev1.ConditionTrue)
	}

	// Each NodePodProbe lists, and has results for, its own node's pods only.
	ctx := framework.Context(t, 3*time.Minute)
	for _, n := range []*rig.Node{s.a, s.b} {
		want := []string{gs[n.Name()].Name, live[n.Name()].Name}
		sort.Strings(want)
		err := framework.WaitFor(ctx, waitMarks, "NodePodProbe "+n.Name()+" holding its own pods", func(ctx context.Context) (bool, string, error) {
			npp, err := s.npp(ctx, n.Name())
			if err != nil {
				return false, err.Error(), nil
			}
			spec, status := nppPods(npp, ns)
			return slices.Equal(spec, want) && slices.Equal(status, want), fmt.Sprintf("spec %v, status %v", spec, status), nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	// Each node service runs the probes of its own node's pods, and of no other.
	for _, c := range []struct {
		n   *rig.Node
		svc *framework.NodeService
	}{{s.a, s.svcA}, {s.b, s.svcB}} {
		st, err := c.svc.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Node != c.n.Name() {
			t.Errorf("the node service of %s says it is node %q", c.n.Name(), st.Node)
		}
		var got []string
		for _, ps := range st.Probes {
			if ps.Namespace == ns {
				got = append(got, ps.Pod+"/"+ps.Probe)
			}
		}
		sort.Strings(got)
		want := []string{gs[c.n.Name()].Name + "/" + idleProbe, live[c.n.Name()].Name + "/" + livenessProbeName}
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("the node service of %s runs probes %v, want %v", c.n.Name(), got, want)
		}
	}

	// A result on node B changes B's pod, not A's.
	s.setIdle(t, gs[s.b.Name()], false)
	s.waitIdle(t, gs[s.b.Name()], corev1.ConditionFalse)
	if p := s.pod(t, gs[s.a.Name()]); !idleIs(p, corev1.ConditionTrue) {
		t.Errorf("node A's pod changed with node B's: %s", describeIdle(p))
	}

	// A liveness failure on node B: a request for node B, carried out there.
	target, other := live[s.b.Name()], live[s.a.Name()]
	s.exec(t, target, appContainer, "touch", failFile)
	var crr *v1alpha1.ContainerRecreateRequest
	// The decider deletes its requests once they finished: look for it while it exists.
	err := framework.WaitFor(ctx, waitRestart, "a ContainerRecreateRequest for "+target.Name, func(ctx context.Context) (bool, string, error) {
		var list v1alpha1.ContainerRecreateRequestList
		if err := s.c.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error(), nil
		}
		var obs []string
		for i := range list.Items {
			r := &list.Items[i]
			obs = append(obs, fmt.Sprintf("%s(pod %s, node %q, phase %q)", r.Name, r.Spec.PodName, r.Labels[v1alpha1.LabelCRRNodeName], r.Status.Phase))
			if r.Spec.PodName == target.Name {
				crr = r
			}
		}
		return crr != nil, strings.Join(obs, ", "), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(target))
	}
	if got := crr.Labels[v1alpha1.LabelCRRNodeName]; got != s.b.Name() {
		t.Errorf("request %s is for node %q, want %s", crr.Name, got, s.b.Name())
	}
	_, err = s.c.WaitForPod(ctx, ns, target.Name, waitRestart, "restarted once, Ready", func(p *corev1.Pod) bool {
		return restarts(p, appContainer) == 1 && framework.PodReady(p)
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(target))
	}
	s.waitProbe(t, s.b, target, livenessProbeName, v1alpha1.ProbeSucceeded)
	if n := restarts(s.pod(t, other), appContainer); n != 0 {
		t.Errorf("node A's liveness pod %s was restarted %d times, want 0", other.Name, n)
	}
}
