// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podready

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

var (
	env        *testenv.Env
	skipReason string
	ctx        = context.Background()
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error { return SetupWithManager(mgr) }, &env, &skipReason)
}

func newPod(t *testing.T, ns, name string, gates ...corev1.PodConditionType) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	for _, g := range gates {
		pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: g})
	}
	// Created as the scheduler would see it: the controller acts before the pod runs (no status
	// write of the test's could race with its own).
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// condition returns pod's KruisePodReady condition as "status message", or "none".
func condition(pod *corev1.Pod) func() (string, error) {
	return func() (string, error) {
		cur := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return "", err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == v1alpha1.PodConditionKruisePodReady {
				return fmt.Sprintf("%s %s", c.Status, c.Message), nil
			}
		}
		return "none", nil
	}
}

func expect(get func() (string, error), want string) func() error {
	return func() error {
		got, err := get()
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("KruisePodReady %q, want %q", got, want)
		}
		return nil
	}
}

// A pod with the gate becomes ready: the missing condition is created True.
func TestOpensMissingCondition(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	pod := newPod(t, ns, "gated", "example.com/other", v1alpha1.PodConditionKruisePodReady)
	poll.Eventually(t, 10*time.Second, expect(condition(pod), "True "))
}

// A pod without the gate never gets the condition: nothing opted it in.
func TestLeavesPodsWithoutGate(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	plain := newPod(t, ns, "plain")
	other := newPod(t, ns, "other-gate", "example.com/other")
	// A gated pod created after them is opened: once it is, the others were seen too.
	gated := newPod(t, ns, "gated", v1alpha1.PodConditionKruisePodReady)
	poll.Eventually(t, 10*time.Second, expect(condition(gated), "True "))
	poll.Consistently(t, time.Second, func() error {
		for _, p := range []*corev1.Pod{plain, other} {
			if err := expect(condition(p), "none")(); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		return nil
	})
}

// A condition someone else set (OpenKruise, or a holder making the pod not ready) is never
// changed, not even back to True.
func TestNeverChangesExistingCondition(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	pod := newPod(t, ns, "held", v1alpha1.PodConditionKruisePodReady)
	held := `[{"userAgent":"example.com/rollout","key":"` + ns + `/held"}]`
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		var conds []corev1.PodCondition
		for _, c := range cur.Status.Conditions {
			if c.Type != v1alpha1.PodConditionKruisePodReady {
				conds = append(conds, c)
			}
		}
		cur.Status.Conditions = append(conds, corev1.PodCondition{Type: v1alpha1.PodConditionKruisePodReady,
			Status: corev1.ConditionFalse, Message: held, LastTransitionTime: metav1.Now()})
		return env.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	poll.Consistently(t, 2*time.Second, expect(condition(pod), "False "+held))
}
