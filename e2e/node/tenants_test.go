// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// hogProbes is how many exec probes the flooding namespace runs: more than the node's 32 exec
// runners, each sleeping past the node's 30 s cap on timeouts.
const hogProbes = 45

// One namespace whose exec probes all hang until their timeout cannot stall another
// namespace's probes on the node: it holds at most its share of the exec runners (8 of 32), the
// other namespace's 1 s exec probe keeps running every second, and the node says, in its status
// and its heartbeat Lease, that probes start late. Before the per-namespace share the flood held
// every runner: the other probe, 29 runs in 30 s before, ran 0 times in the next 30 (issue 30).
func TestNamespaceCannotStallAnother(t *testing.T) {
	c := framework.Get(t)
	c.InstallCRDs(t) // also the lease namespace and the nodes' lease Role
	hogNS, otherNS := c.Namespace(t), c.Namespace(t)
	hog := c.CreatePod(t, framework.NewPod(hogNS, "hog", framework.Command("box", "sleep", "100000")))
	other := c.CreatePod(t, framework.NewPod(otherNS, "other", framework.Command("box", "sleep", "100000")))
	hog = c.WaitForPodReady(t, hog, 2*time.Minute)
	other = c.WaitForPodReady(t, other, 2*time.Minute)

	// The other namespace's probe counts its runs in a file of its container.
	counted := v1alpha1.PodProbe{Name: other.Name, Namespace: other.Namespace, UID: string(other.UID), IP: other.Status.PodIP,
		Probes: []v1alpha1.ContainerProbe{probe("counted", "box", exec("sh", "-c", "echo >> /tmp/runs"))}}
	var flood []v1alpha1.ContainerProbe
	for i := range hogProbes {
		// 55 s, as written past admission (whose ceiling is 30 s): the node caps it at 30.
		flood = append(flood, probe(fmt.Sprintf("hang-%d", i), "box", exec("sleep", "50"), func(p *corev1.Probe) { p.TimeoutSeconds = 55 }))
	}
	s := &suite{c: c, pod: other}
	s.writeEntries(t, []v1alpha1.PodProbe{counted})
	dedicated, err := c.Rig.Kubeconfig("probeshim:node:"+c.Rig.NodeName(), "probeshim:nodes")
	if err != nil {
		t.Fatal(err)
	}
	s.svc = c.StartNodeService(t, "--kubeconfig", dedicated, "--heartbeat-renew-interval-seconds", "2")
	s.waitState(t, "counted", v1alpha1.ProbeSucceeded, 30*time.Second)

	runs := func() int {
		t.Helper()
		out, _, err := c.Exec(framework.Context(t, time.Minute), other.Namespace, other.Name, "box", "sh", "-c", "wc -l < /tmp/runs")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("counting the runs: %q: %v", out, err)
		}
		return n
	}
	window := func(what string) int {
		t.Helper()
		start, t0 := runs(), time.Now()
		time.Sleep(15 * time.Second) // measures: how often the other namespace's 1 s probe runs
		n := runs() - start
		t.Logf("the other namespace's 1 s exec probe ran %d times in %s %s", n, time.Since(t0).Round(100*time.Millisecond), what)
		return n
	}
	quiet := window("alone")

	s.writeEntries(t, []v1alpha1.PodProbe{counted, {Name: hog.Name, Namespace: hog.Namespace, UID: string(hog.UID),
		IP: hog.Status.PodIP, Probes: flood}})
	ctx := framework.Context(t, 3*time.Minute)
	err = framework.WaitFor(ctx, time.Minute, "the flood to fill its share of the exec runners", func(ctx context.Context) (bool, string, error) {
		st, err := s.svc.Status(ctx)
		if err != nil || st.Runners == nil {
			return false, fmt.Sprint(err), nil
		}
		exec := st.Runners.Pools[0]
		return exec.Running >= exec.PerNamespace && exec.Queued > 0 && st.Runners.Late != "", fmt.Sprintf("%+v late %q", exec, st.Runners.Late), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.svc.Logs())
	}
	flooded := window("while the other namespace's 45 hanging execs flood the node")

	st, err := s.svc.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec := st.Runners.Pools[0]
	t.Logf("exec runners: %+v; late: %s", exec, st.Runners.Late)
	if exec.Running > exec.PerNamespace+1 {
		t.Errorf("%d execs run, want the flood's share %d and the other's one at most", exec.Running, exec.PerNamespace)
	}
	if flooded < quiet*2/3 {
		t.Errorf("the other namespace's probe ran %d times in 15 s under the flood, %d alone: stalled by another namespace", flooded, quiet)
	}
	if !strings.Contains(st.Runners.Late, "exec probes start late") {
		t.Errorf("status late %q, want the exec pool named", st.Runners.Late)
	}
	// The heartbeat Lease says so too.
	err = framework.WaitFor(ctx, 30*time.Second, "the Lease's probes-late annotation", func(ctx context.Context) (bool, string, error) {
		l, err := c.Kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, c.Rig.NodeName(), metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		v := l.Annotations[v1alpha1.AnnotationProbesLate]
		return strings.Contains(v, "exec probes start late"), fmt.Sprintf("%q", v), nil
	})
	if err != nil {
		t.Error(err)
	}
}
