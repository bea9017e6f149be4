// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

// PodCheck reports whether a pod is as wanted and, if not, what differs (for the wait's timeout
// message).
type PodCheck func(*corev1.Pod) (bool, string)

// All holds when every check does; it names every one that does not.
func All(checks ...PodCheck) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		var miss []string
		for _, c := range checks {
			if ok, why := c(p); !ok {
				miss = append(miss, why)
			}
		}
		return len(miss) == 0, strings.Join(miss, "; ")
	}
}

// Ready wants the pod Ready.
func Ready(p *corev1.Pod) (bool, string) { return PodReady(p), "not Ready" }

// ConditionNamed returns the pod's condition of type typ, or nil.
func ConditionNamed(p *corev1.Pod, typ string) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// CondIs wants condition typ with status and a message containing msg.
func CondIs(typ string, status corev1.ConditionStatus, msg string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		c := ConditionNamed(p, typ)
		if c == nil {
			return false, "no condition " + typ
		}
		if c.Status != status || !strings.Contains(c.Message, msg) {
			return false, fmt.Sprintf("condition %s=%s %q, want %s %q", typ, c.Status, c.Message, status, msg)
		}
		return true, ""
	}
}

// CondReason wants condition typ with reason.
func CondReason(typ, reason string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		c := ConditionNamed(p, typ)
		if c == nil {
			return false, "no condition " + typ
		}
		return c.Reason == reason, fmt.Sprintf("condition %s reason %q, want %q", typ, c.Reason, reason)
	}
}

// NoCondition wants no condition typ.
func NoCondition(typ string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		if c := ConditionNamed(p, typ); c != nil {
			return false, fmt.Sprintf("condition %s=%s still there", typ, c.Status)
		}
		return true, ""
	}
}

// LabelIs wants label k set to v.
func LabelIs(k, v string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		got, ok := p.Labels[k]
		return ok && got == v, fmt.Sprintf("label %s=%q (set %t), want %q", k, got, ok, v)
	}
}

// LabelGone wants no label k.
func LabelGone(k string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		got, ok := p.Labels[k]
		return !ok, fmt.Sprintf("label %s=%q still there", k, got)
	}
}

// AnnotationIs wants annotation k set to v.
func AnnotationIs(k, v string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		got, ok := p.Annotations[k]
		return ok && got == v, fmt.Sprintf("annotation %s=%q (set %t), want %q", k, got, ok, v)
	}
}

// AnnotationGone wants no annotation k.
func AnnotationGone(k string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		got, ok := p.Annotations[k]
		return !ok, fmt.Sprintf("annotation %s=%q still there", k, got)
	}
}

// RestartCount wants container name restarted exactly want times.
func RestartCount(name string, want int32) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		st := ContainerStatus(p, name)
		if st == nil {
			return false, "no status of container " + name
		}
		return st.RestartCount == want, fmt.Sprintf("container %s restartCount %d, want %d", name, st.RestartCount, want)
	}
}

// ContainerRunning wants container name running.
func ContainerRunning(name string) PodCheck {
	return func(p *corev1.Pod) (bool, string) {
		st := ContainerStatus(p, name)
		if st == nil {
			return false, "no status of container " + name
		}
		return st.State.Running != nil, fmt.Sprintf("container %s %+v, want running", name, st.State)
	}
}

// WaitForPodCheck waits until check holds for the pod and returns the pod as last seen; the
// timeout error says what the check saw last.
func (c *Cluster) WaitForPodCheck(ctx context.Context, ns, name string, timeout time.Duration, what string, check PodCheck) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := WaitFor(ctx, timeout, fmt.Sprintf("pod %s/%s: %s", ns, name, what), func(ctx context.Context) (bool, string, error) {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "not found", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		last = p
		ok, why := check(p)
		return ok, why, nil
	})
	return last, err
}

// ExplainPod is the state of things around a pod, for failure messages: its labels, annotations
// and conditions, its entries in the node's NodePodProbe (spec and status), its events and the end
// of svc's log (svc may be nil).
func (c *Cluster) ExplainPod(pod *corev1.Pod, svc *NodeService) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	if p, err := c.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "pod: %s\nlabels: %v\nannotations: %v\n", DescribePod(p), p.Labels, p.Annotations)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s %q (transition %s)\n", c.Type, c.Status, c.Message, c.LastTransitionTime)
		}
	}
	npp := &v1alpha1.NodePodProbe{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: c.Rig.NodeName()}, npp); err == nil {
		for _, pp := range npp.Spec.PodProbes {
			if pp.Namespace == pod.Namespace {
				names := make([]string, len(pp.Probes))
				for i, p := range pp.Probes {
					names[i] = p.Name
				}
				slices.Sort(names)
				fmt.Fprintf(&b, "NodePodProbe spec %s/%s (%s): %v\n", pp.Namespace, pp.Name, pp.UID, names)
			}
		}
		for _, ps := range npp.Status.PodProbeStatuses {
			if ps.Namespace == pod.Namespace {
				for _, st := range ps.ProbeStates {
					fmt.Fprintf(&b, "NodePodProbe status %s/%s %s: %s %q\n", ps.Namespace, ps.Name, st.Name, st.State, st.Message)
				}
			}
		}
	}
	if evs, err := c.Events(ctx, pod.Namespace, pod.Name); err == nil {
		b.WriteString("events:\n" + FormatEvents(evs))
	}
	if svc != nil {
		b.WriteString("node service log (end):\n" + logtail.Last(svc.Logs(), explainLogLines))
	}
	return b.String()
}

// explainLogLines is how much of the node service's log ExplainPod shows.
const explainLogLines = 20

// EditMarker changes the marker as a client should: read, change, write, again on a conflict (the
// cluster part patches the marker's result annotations meanwhile).
func (c *Cluster) EditMarker(t testing.TB, m *v1alpha1.PodProbeMarker, edit func(*v1alpha1.PodProbeMarker)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ctx := Context(t, time.Minute)
		cur := &v1alpha1.PodProbeMarker{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
			return err
		}
		edit(cur)
		return c.Client.Update(ctx, cur)
	})
	if err != nil {
		t.Fatalf("update PodProbeMarker %s/%s: %v", m.Namespace, m.Name, err)
	}
}

// MustExec runs cmd in a container of a pod and fails the test if it cannot or the command fails.
func (c *Cluster) MustExec(t testing.TB, ns, pod, container string, cmd ...string) {
	t.Helper()
	if _, _, err := c.Exec(Context(t, time.Minute), ns, pod, container, cmd...); err != nil {
		t.Fatal(err)
	}
}
