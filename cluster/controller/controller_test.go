// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller"
	"github.com/probeshim/probeshim/cluster/controller/podstatus"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

var (
	env        *testenv.Env
	skipReason string
	ctx        = context.Background()
)

const wait = 10 * time.Second

// heldProbes and heldCRR stand in for the OpenKruise detector: "" unless a test holds the work.
var heldProbes, heldCRR atomic.Value

func init() {
	heldProbes.Store("")
	heldCRR.Store("")
}

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error {
		return controller.SetupWithManager(mgr, controller.WithHolds(
			func() string { return heldProbes.Load().(string) }, func() string { return heldCRR.Load().(string) }))
	}, &env, &skipReason)
}

func spec(node string) (string, error) {
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, npp); err != nil {
		return "", err
	}
	var parts []string
	for _, pp := range npp.Spec.PodProbes {
		var ps []string
		for _, p := range pp.Probes {
			ps = append(ps, p.Name)
		}
		parts = append(parts, pp.Name+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " "), nil
}

func specIs(node, want string) func() error {
	return func() error {
		got, err := spec(node)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("NodePodProbe spec = %q, want %q", got, want)
		}
		return nil
	}
}

// writesQuiet waits until the manager has written nothing for d: the writes earlier changes bring
// (some folded, a second late) are done.
func writesQuiet(t *testing.T, d time.Duration) {
	t.Helper()
	last, since := env.Writes.Len(), time.Now()
	err := poll.Until(context.Background(), wait, fmt.Sprintf("no writes for %s", d), func(context.Context) (bool, string, error) {
		if n := env.Writes.Len(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= d, fmt.Sprintf("%d writes so far", last), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGameServerLifecycle runs the three controllers together, with the test in the role of the
// node service (writing NodePodProbe status) and of the kubelet (pod status).
func TestGameServerLifecycle(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	poll.Eventually(t, wait, specIs(node.Name, ""))

	const cost = "controller.kubernetes.io/pod-deletion-cost"
	marker := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "game-idle"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "idle", ContainerName: "main", PodConditionType: "game.io/idle",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/idle"}}}}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
					{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"gameserver-idle": "true"}, Annotations: map[string]string{cost: "-10"}},
					{State: v1alpha1.ProbeFailed, Annotations: map[string]string{cost: "10"}},
				},
			}},
		},
	}
	if err := env.Client.Create(ctx, marker); err != nil {
		t.Fatal(err)
	}
	probeContext, _ := v1alpha1.FormatContainerProbeContext([]v1alpha1.ContainerLivenessProbe{{Name: "main",
		LivenessProbe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}})
	pod := env.RunningPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gs-0", Labels: map[string]string{"app": "game"},
			Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", v1alpha1.AnnotationContainerProbeContext: probeContext}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}, "10.10.0.1")
	poll.Eventually(t, wait, specIs(node.Name, "gs-0:game-idle#idle,main-livenessProbe"))

	// The node service reports: idle, and the liveness probe failing (the decider's business).
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node.Name}, npp); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	npp.Status.PodProbeStatuses = []v1alpha1.PodProbeStatus{{Name: "gs-0", Namespace: ns, UID: string(pod.UID), ProbeStates: []v1alpha1.ContainerProbeState{
		{Name: "game-idle#idle", State: v1alpha1.ProbeSucceeded, LastProbeTime: now, LastTransitionTime: now},
		{Name: "main-livenessProbe", State: v1alpha1.ProbeFailed, LastProbeTime: now, LastTransitionTime: now, Message: "exit 1"},
	}}}
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		t.Fatal(err)
	}
	podIs := func(idle, costV, condition string, record bool) func() error {
		return func() error {
			p := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
				return err
			}
			var cond string
			for _, c := range p.Status.Conditions {
				if c.Type == "game.io/idle" {
					cond = string(c.Status)
				}
			}
			_, hasRecord := p.Annotations[podstatus.RecordAnnotation]
			if p.Labels["gameserver-idle"] != idle || p.Annotations[cost] != costV || cond != condition || hasRecord != record {
				return fmt.Errorf("pod: idle=%q cost=%q condition=%q record=%v; want %q %q %q %v",
					p.Labels["gameserver-idle"], p.Annotations[cost], cond, hasRecord, idle, costV, condition, record)
			}
			return nil
		}
	}
	poll.Eventually(t, wait, podIs("true", "-10", "True", true))

	// Steady state: a lastProbeTime refresh by the node service writes nothing anywhere. The
	// marker's status follows pod and NodePodProbe changes a second late (folded): let it settle,
	// and the writes end.
	poll.Eventually(t, wait, func() error {
		m := &v1alpha1.PodProbeMarker{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(marker), m); err != nil {
			return err
		}
		if m.Status.ObservedGeneration != m.Generation || m.Status.MatchedPods != 1 {
			return fmt.Errorf("marker status %+v, generation %d", m.Status, m.Generation)
		}
		return nil
	})
	writesQuiet(t, time.Second)
	mark := env.Writes.Len()
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node.Name}, npp); err != nil {
		t.Fatal(err)
	}
	later := metav1.NewTime(now.Add(time.Minute))
	for i := range npp.Status.PodProbeStatuses[0].ProbeStates {
		npp.Status.PodProbeStatuses[0].ProbeStates[i].LastProbeTime = later
	}
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		t.Fatal(err)
	}
	poll.Consistently(t, time.Second, func() error {
		if ws := env.Writes.Since(mark); len(ws) > 0 {
			return fmt.Errorf("writes at steady state: %+v", ws)
		}
		return nil
	})

	// The marker goes: its entry, label, annotation, condition and record go; liveness stays.
	if err := env.Client.Delete(ctx, marker); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(node.Name, "gs-0:main-livenessProbe"))
	poll.Eventually(t, wait, podIs("", "", "", false))

	// The pod goes: nothing left. The node goes: the NodePodProbe goes.
	env.ForceDelete(t, pod)
	poll.Eventually(t, wait, specIs(node.Name, ""))
	if err := env.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, func() error {
		if _, err := spec(node.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodePodProbe still there: %w", err)
		}
		return nil
	})
}

// TestBothMappingsUnderChurn creates and deletes pods that have marker and liveness probes all at
// once, so the two controllers writing one NodePodProbe race; the result must still be exact.
func TestBothMappingsUnderChurn(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	poll.Eventually(t, wait, specIs(node.Name, ""))
	marker := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "p", ContainerName: "main", PodConditionType: "game.io/p",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}},
		},
	}
	if err := env.Client.Create(ctx, marker); err != nil {
		t.Fatal(err)
	}
	probeContext, _ := v1alpha1.FormatContainerProbeContext([]v1alpha1.ContainerLivenessProbe{{Name: "main",
		LivenessProbe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}})
	const n = 12
	var pods []*corev1.Pod
	var want []string
	for i := range n {
		name := fmt.Sprintf("gs-%02d", i)
		pods = append(pods, env.RunningPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "game"},
				Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", v1alpha1.AnnotationContainerProbeContext: probeContext}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}, fmt.Sprintf("10.11.0.%d", i+1)))
		want = append(want, name+":m#p,main-livenessProbe")
	}
	poll.Eventually(t, wait, specIs(node.Name, strings.Join(want, " ")))
	for _, p := range pods[:n/2] {
		env.ForceDelete(t, p)
	}
	poll.Eventually(t, wait, specIs(node.Name, strings.Join(want[n/2:], " ")))
	if err := env.Client.Delete(ctx, marker); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods[n/2:] {
		env.ForceDelete(t, p)
	}
	poll.Eventually(t, wait, specIs(node.Name, ""))
}
