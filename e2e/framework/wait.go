// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// PollInterval is how often the Wait helpers look.
const PollInterval = poll.Interval

// Condition reports whether what is awaited holds; observed describes what it
// saw, for the timeout message. An error ends the wait at once.
type Condition = poll.Condition

// WaitFor polls cond every PollInterval until it holds, returns an error, ctx
// ends, or timeout passes. The timeout error names what was awaited and the
// last thing observed. (It is poll.Until, the project's one poll.)
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond Condition) error {
	return poll.Until(ctx, timeout, what, cond)
}

// Never watches for d for what must not happen: cond holding is an error naming what was seen.
// It returns nil after d (or ctx's error when ctx ends first), and an error of cond at once.
func Never(ctx context.Context, d time.Duration, what string, cond Condition) error {
	var happened bool
	var seen string
	var condErr error
	// cond gets ctx, not the look's own: a call the end of the look overtakes is not cut short.
	_ = poll.Until(ctx, d, what, func(context.Context) (bool, string, error) {
		done, obs, err := cond(ctx)
		happened, seen, condErr = done, obs, err
		return done, obs, err
	})
	switch {
	case condErr != nil:
		return fmt.Errorf("watching for %s: %w", what, condErr)
	case happened:
		return fmt.Errorf("%s within %s: %s", what, d, seen)
	}
	return ctx.Err()
}

// WaitForPod waits until cond holds for the pod and returns the pod as last
// seen. A pod that does not exist (yet) is polled for like any other state.
func (c *Cluster) WaitForPod(ctx context.Context, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	return c.WaitForPodCheck(ctx, ns, name, timeout, what, func(p *corev1.Pod) (bool, string) { return cond(p), DescribePod(p) })
}

// WaitForPodReady waits for the pod's Ready condition to be True.
func (c *Cluster) WaitForPodReady(t testing.TB, pod *corev1.Pod, timeout time.Duration) *corev1.Pod {
	t.Helper()
	p, err := c.WaitForPod(Context(t, timeout+time.Second), pod.Namespace, pod.Name, timeout, "Ready", PodReady)
	if err != nil {
		t.Fatal(c.withEvents(pod, err))
	}
	return p
}

// WaitForPodGone waits until the pod no longer exists.
func (c *Cluster) WaitForPodGone(ctx context.Context, ns, name string, timeout time.Duration) error {
	return WaitFor(ctx, timeout, fmt.Sprintf("pod %s/%s to be gone", ns, name), func(ctx context.Context) (bool, string, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, DescribePod(p), nil
	})
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool { return PodCondition(p, corev1.PodReady) == corev1.ConditionTrue }

// PodCondition returns the status of the pod's condition of type typ, or "".
func PodCondition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// ContainerStatus returns the status of the named container, or nil.
func ContainerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// DescribePod is a one-line summary of a pod's state for failure messages.
func DescribePod(p *corev1.Pod) string {
	s := fmt.Sprintf("phase=%s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		s += fmt.Sprintf(" %s=%s", c.Type, c.Status)
	}
	for _, cs := range p.Status.ContainerStatuses {
		state := "?"
		switch {
		case cs.State.Running != nil:
			state = "running"
		case cs.State.Waiting != nil:
			state = "waiting:" + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated:%s(%d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		s += fmt.Sprintf(" [%s %s ready=%t restarts=%d]", cs.Name, state, cs.Ready, cs.RestartCount)
	}
	return s
}

// Percentile is the nearest-rank p-quantile (0 < p <= 1) of ds, 0 for none; ds is not changed.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(float64(len(s))*p)) - 1
	return s[max(0, min(i, len(s)-1))]
}
