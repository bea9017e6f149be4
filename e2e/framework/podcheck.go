// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
