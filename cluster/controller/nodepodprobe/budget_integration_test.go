// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// fullMarker is a marker of the most probes a marker may have, all on one container port.
func fullMarker(ns, name string, sel map[string]string) *v1alpha1.PodProbeMarker {
	m := newMarker(ns, name, sel)
	for i := range validation.MaxProbesPerMarker {
		m.Spec.Probes = append(m.Spec.Probes, tcpProbe(fmt.Sprintf("p%02d", i), "game"))
	}
	return m
}

// probeNames lists the probe names of a node's spec by namespace.
func probeNames(node string) (map[string][]string, error) {
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, npp); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, pp := range npp.Spec.PodProbes {
		for _, p := range pp.Probes {
			out[pp.Namespace] = append(out[pp.Namespace], p.Name)
		}
	}
	return out, nil
}

func countPrefix(names []string, prefix string) int {
	n := 0
	for _, s := range names {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// A greedy tenant's markers over the node budget: only its largest markers are left out; the
// modest tenant's probes and another tenant's enhanced liveness probe stay; the marker gets an
// event and a NodeBudget condition; the NodePodProbe write succeeds. Then the node's status with
// every probe failing and the longest messages the node writes is accepted and stays under 1 MiB
// stored, managed fields included.
func TestGreedyTenantIsLeftOutOverTheNodeBudget(t *testing.T) {
	testenv.Require(t, env, skipReason)
	node := env.Node(t, true)
	greedy, modest, third := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	web := map[string]string{"app": "web"}

	// Another tenant's pod with an enhanced liveness probe, as the liveness mapping writes it.
	live := env.RunningPod(t, newPod(third, "live", node.Name, nil), "10.9.0.250")
	poll.Eventually(t, wait, specIs(node.Name, ""))
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		npp := getNPP(t, node.Name)
		npp.Spec.PodProbes = append(npp.Spec.PodProbes, v1alpha1.PodProbe{Name: live.Name, Namespace: third, UID: string(live.UID),
			IP: "10.9.0.250", Probes: []v1alpha1.ContainerProbe{{Name: v1alpha1.LivenessProbeName("main"), ContainerName: "main",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(7777)}}}}}}})
		return env.Client.Update(ctx, npp)
	}); err != nil {
		t.Fatal(err)
	}

	env.RunningPod(t, newPod(modest, "m-0", node.Name, web), "10.9.1.1")
	create(t, newMarker(modest, "small", web, tcpProbe("ready", "game")))
	const pods = 14
	for i := range pods {
		env.RunningPod(t, newPod(greedy, fmt.Sprintf("g-%02d", i), node.Name, web), fmt.Sprintf("10.9.0.%d", i+1))
	}
	// Three full markers on 14 pods: 1,344 probes, about 1.3 times the node budget.
	for _, name := range []string{"g1", "g2", "g3"} {
		create(t, fullMarker(greedy, name, web))
	}
	// A marker written past the webhook with a 1 MiB header: before the bounds, its entries made
	// every write of the node's NodePodProbe fail (over etcd's limit), for every tenant.
	huge := newMarker(greedy, "huge", web, v1alpha1.PodContainerProbe{Name: "big", ContainerName: "main", PodConditionType: "game.io/big",
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/", Port: intstr.FromInt32(8080), HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Big", Value: strings.Repeat("v", 1<<20)}}}}}}})
	create(t, huge)

	poll.Eventually(t, 30*time.Second, func() error {
		names, err := probeNames(node.Name)
		if err != nil {
			return err
		}
		got := fmt.Sprintf("liveness %d, modest %d, g1 %d, g2 %d, g3 %d, huge %d",
			countPrefix(names[third], "main-livenessProbe"), countPrefix(names[modest], "small#"),
			countPrefix(names[greedy], "g1#"), countPrefix(names[greedy], "g2#"), countPrefix(names[greedy], "g3#"),
			countPrefix(names[greedy], "huge#"))
		// Equal markers: the fairness keeps the first by name and leaves out the last.
		if want := fmt.Sprintf("liveness 1, modest 1, g1 %d, g2 %d, g3 0, huge 0", pods*32, pods*32); got != want {
			return fmt.Errorf("NodePodProbe holds %s, want %s", got, want)
		}
		return nil
	})

	// The event and the condition on the marker left out, none on the others.
	poll.Eventually(t, wait, func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(greedy)); err != nil {
			return err
		}
		var on []string
		for _, e := range evs.Items {
			if e.Reason == EventReasonNodeBudgetExceeded {
				on = append(on, e.Regarding.Name)
				if e.Regarding.Name == "g3" && !strings.Contains(e.Note, "node "+node.Name+" has no room") {
					return fmt.Errorf("event note %q", e.Note)
				}
			}
		}
		if len(on) != 1 || on[0] != "g3" {
			return fmt.Errorf("NodeBudgetExceeded events on %v, want on g3 only", on)
		}
		return nil
	})
	poll.Eventually(t, wait, func() error {
		m := &v1alpha1.PodProbeMarker{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: greedy, Name: "g3"}, m); err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.PodProbeMarkerNodeBudget)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNodeBudgetExceeded ||
			!strings.Contains(c.Message, node.Name) || !strings.Contains(c.Message, "--node-probe-budget") {
			return fmt.Errorf("g3 conditions %+v", m.Status.Conditions)
		}
		if m.Status.ObservedGeneration != m.Generation {
			return fmt.Errorf("g3 observedGeneration %d, generation %d", m.Status.ObservedGeneration, m.Generation)
		}
		g1 := &v1alpha1.PodProbeMarker{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: greedy, Name: "g1"}, g1); err != nil {
			return err
		}
		if len(g1.Status.Conditions) != 0 {
			return fmt.Errorf("g1 conditions %+v", g1.Status.Conditions)
		}
		return nil
	})

	// Every probe fails with the longest message the node writes for this many probes.
	npp := getNPP(t, node.Name)
	n := 0
	for _, pp := range npp.Spec.PodProbes {
		n += len(pp.Probes)
	}
	failAll(npp, n)
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		t.Fatalf("writing the status of %d failing probes: %v", n, err)
	}
	stored := getNPP(t, node.Name)
	b, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d probes all failing, messages of %d encoded bytes: stored NodePodProbe %d bytes (managed fields included)",
		n, validation.MessageCap(n), len(b))
	if len(b) > 1<<20 {
		t.Errorf("stored NodePodProbe is %d bytes, want at most 1 MiB", len(b))
	}
	if est := nppspec.EntriesCost(stored.Spec.PodProbes, func(string) bool { return true }) + validation.NodeStatusMessageBudget; len(b) > est {
		t.Errorf("stored NodePodProbe is %d bytes, more than its estimate %d plus the message budget", len(b), est)
	}

	// Deleting g2 makes room: g3 is placed and its condition turns True.
	if err := env.Client.Delete(ctx, &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: greedy, Name: "g2"}}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, func() error {
		names, err := probeNames(node.Name)
		if err != nil {
			return err
		}
		if g2, g3 := countPrefix(names[greedy], "g2#"), countPrefix(names[greedy], "g3#"); g2 != 0 || g3 != pods*32 {
			return fmt.Errorf("g2 %d, g3 %d probes", g2, g3)
		}
		m := &v1alpha1.PodProbeMarker{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: greedy, Name: "g3"}, m); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.PodProbeMarkerNodeBudget); c == nil || c.Status != metav1.ConditionTrue {
			return errors.New("g3 NodeBudget condition not True")
		}
		return nil
	})
}

// 5,000 probes on one node, every one failing with the longest message the node service writes
// for that many (validation.MessageCap): the API server accepts the status and the stored object
// stays under 1 MiB. The probes are enhanced-liveness entries, which the marker controller never
// removes, so the spec holds all 5,000 whatever the budget.
func TestStatusOf5000FailingProbes(t *testing.T) {
	testenv.Require(t, env, skipReason)
	node := env.Node(t, true)
	poll.Eventually(t, wait, specIs(node.Name, ""))
	const pods, perPod = 100, 50
	var entries []v1alpha1.PodProbe
	for i := range pods {
		pp := v1alpha1.PodProbe{Name: fmt.Sprintf("p-%03d", i), Namespace: "tenant", UID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i),
			IP: fmt.Sprintf("10.8.%d.%d", i/250, i%250+1)}
		for j := range perPod {
			c := fmt.Sprintf("c%02d", j)
			pp.Probes = append(pp.Probes, v1alpha1.ContainerProbe{Name: v1alpha1.LivenessProbeName(c), ContainerName: c,
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}}})
		}
		entries = append(entries, pp)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		npp := getNPP(t, node.Name)
		npp.Spec.PodProbes = entries
		return env.Client.Update(ctx, npp)
	}); err != nil {
		t.Fatalf("writing a spec of %d probes: %v", pods*perPod, err)
	}
	npp := getNPP(t, node.Name)
	n := pods * perPod
	failAll(npp, n)
	status, _ := json.Marshal(npp.Status)
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		t.Fatalf("writing the status of %d failing probes (%d bytes): %v", n, len(status), err)
	}
	b, err := json.Marshal(getNPP(t, node.Name))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d failing probes, messages of %d encoded bytes: status %d bytes, stored NodePodProbe %d bytes (managed fields included)",
		n, validation.MessageCap(n), len(status), len(b))
	// The status alone stays under 1 MiB. The whole object cannot: at 5,000 probes the spec and
	// the managed fields take about 440 KB whatever the messages; that is why the controller's
	// node budget (about 1,000 small probes) is what keeps a real node under 1 MiB. This many
	// probes must still stay under etcd's default request limit.
	if len(status) > 1<<20 {
		t.Errorf("status is %d bytes, want at most 1 MiB", len(status))
	}
	if etcdLimit := 3 << 19; len(b) >= etcdLimit {
		t.Errorf("stored NodePodProbe is %d bytes, want under etcd's 1.5 MiB", len(b))
	}
}

// failAll sets the status of every probe of npp's spec (n in all) to Failed with the longest
// message the node writes for that many probes.
func failAll(npp *v1alpha1.NodePodProbe, n int) {
	msg := validation.TruncateMessage(strings.Repeat("<", 1<<20), validation.MessageCap(n))
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	for _, pp := range npp.Spec.PodProbes {
		ps := v1alpha1.PodProbeStatus{Name: pp.Name, Namespace: pp.Namespace, UID: pp.UID}
		for _, p := range pp.Probes {
			ps.ProbeStates = append(ps.ProbeStates, v1alpha1.ContainerProbeState{Name: p.Name, State: v1alpha1.ProbeFailed,
				LastProbeTime: now, LastTransitionTime: now, Message: msg})
		}
		npp.Status.PodProbeStatuses = append(npp.Status.PodProbeStatuses, ps)
	}
}
