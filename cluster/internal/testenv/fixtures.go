// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var seq atomic.Int64

// Name returns a name unique within the test binary, starting with prefix.
func Name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// Namespace creates a namespace with a unique name.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Name(strings.ToLower(sanitize(t.Name())))}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// Node creates a node, Ready or not, deleted when the test ends.
func (e *Env) Node(t testing.TB, ready bool) *corev1.Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: Name("node")}}
	if err := e.Client.Create(context.Background(), node); err != nil {
		t.Fatalf("creating node: %v", err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(e.Client.Delete(context.Background(), node)) })
	e.SetNodeReady(t, node, ready)
	return node
}

// SetNodeReady sets the node's Ready condition, as the kubelet would.
func (e *Env) SetNodeReady(t testing.TB, node *corev1.Node, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := e.Client.Status().Update(context.Background(), node); err != nil {
		t.Fatalf("setting node %s Ready=%v: %v", node.Name, ready, err)
	}
}

// RunningPod creates pod (spec.nodeName set) and gives it the status the kubelet would once its
// init containers are done: Running, Initialized, with ip.
func (e *Env) RunningPod(t testing.TB, pod *corev1.Pod, ip string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if err := e.Client.Create(ctx, pod); err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
		},
	}
	if err := e.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("setting status of pod %s: %v", pod.Name, err)
	}
	return pod
}

// ForceDelete deletes obj at once (grace period 0): without a kubelet a pod would otherwise stay
// terminating forever.
func (e *Env) ForceDelete(t testing.TB, obj client.Object) {
	t.Helper()
	if err := e.Client.Delete(context.Background(), obj, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
		t.Fatalf("deleting %s: %v", obj.GetName(), err)
	}
}
