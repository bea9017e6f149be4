// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package podcache slims the Pods the cluster deployment caches to the fields its controllers
// read. The deployment caches every Pod of the cluster, and the cache is shared by the manager's
// controllers (the liveness decider, the NodePodProbe, liveness, pod status and
// ContainerRecreateRequest controllers): a field dropped here is a field none of them may read
// from the cache. The webhooks and the follow-up reads that must see a pod as it is now use the
// manager's uncached APIReader and get whole pods.
//
// Kept: the object metadata but the managed fields and kubectl's last-applied-configuration
// annotation (labels, the other annotations, owner references, finalizers, deletion stamps);
// spec.nodeName, hostNetwork, terminationGracePeriodSeconds, readinessGates; of each container
// and init container the name, ports, restartPolicy and startupProbe, and its env names and values in a pod
// using the enhanced liveness probe (the exec command's $(VAR) expansion); status.phase, podIP,
// conditions but the three no one here reads (ContainersReady, PodScheduled,
// PodReadyToStartContainers: the kubelet's and the scheduler's own, which no marker may write);
// of each container status the name, containerID, restartCount, started and
// state.running.startedAt.
//
// The strings many pods share (namespace, node, label and annotation keys and values, owner,
// container and condition names) are interned: the pods of one workload carry the same labels
// and the same probe annotation, which is then held once.
//
// The cache's pod informer (NewInformer) stores each slim pod packed (compactPod, a few hundred
// bytes where the slim *corev1.Pod takes several KB: an empty corev1.Pod alone is 1,240 B) and
// unpacks it on every read into the pod Slim returns.
//
// A new reader of another pod field adds it here, to compactPod, and to the table in
// podcache_test.go; TestCompactUnpacksToSlim fails until compactPod keeps it.
package podcache

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// lastApplied is kubectl's copy of the whole object as last applied: often the largest
// annotation, read by no one here (markers may not set keys of kubernetes.io).
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// ByObject is the cache option for Pods: the transform below. It replaces the cache's
// DefaultTransform for Pods, so Transform drops the managed fields itself.
func ByObject() cache.ByObject { return cache.ByObject{Transform: Transform} }

// Transform is a cache transform (toolscache.TransformFunc): a Pod becomes Slim(pod), anything
// else passes unchanged. It is idempotent, as the informer requires.
func Transform(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return Slim(pod), nil
	}
	return obj, nil
}

// Slim returns a new Pod holding only the fields the cluster deployment reads from its cache
// (see the package comment). It may share the kept slices (ports, readiness gates) with pod
// and changes nothing of pod.
func Slim(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	out.ManagedFields = nil
	out.Namespace = intern(pod.Namespace)
	out.GenerateName = intern(pod.GenerateName)
	out.Labels = internMap(pod.Labels, "")
	out.Annotations = internMap(pod.Annotations, lastApplied)
	if pod.OwnerReferences != nil {
		out.OwnerReferences = make([]metav1.OwnerReference, len(pod.OwnerReferences))
		for i, r := range pod.OwnerReferences {
			r.APIVersion, r.Kind, r.Name = intern(r.APIVersion), intern(r.Kind), intern(r.Name)
			out.OwnerReferences[i] = r
		}
	}
	env := v1alpha1.UsesEnhancedLiveness(pod)
	out.Spec = corev1.PodSpec{
		NodeName:                      intern(pod.Spec.NodeName),
		HostNetwork:                   pod.Spec.HostNetwork,
		TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
		ReadinessGates:                pod.Spec.ReadinessGates,
		InitContainers:                containers(pod.Spec.InitContainers, env),
		Containers:                    containers(pod.Spec.Containers, env),
	}
	out.Status = corev1.PodStatus{
		Phase:                 pod.Status.Phase,
		PodIP:                 pod.Status.PodIP,
		Conditions:            conditions(pod.Status.Conditions),
		InitContainerStatuses: statuses(pod.Status.InitContainerStatuses),
		ContainerStatuses:     statuses(pod.Status.ContainerStatuses),
	}
	return out
}

func containers(in []corev1.Container, withEnv bool) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		c := &in[i]
		// StartupProbe: whether there is one decides the liveness controller's startup hold.
		out[i] = corev1.Container{Name: intern(c.Name), Ports: c.Ports, RestartPolicy: c.RestartPolicy, StartupProbe: c.StartupProbe}
		if withEnv && len(c.Env) > 0 {
			// Names and plain values: a valueFrom variable expands to "" as before.
			out[i].Env = make([]corev1.EnvVar, len(c.Env))
			for j, e := range c.Env {
				out[i].Env[j] = corev1.EnvVar{Name: intern(e.Name), Value: intern(e.Value)}
			}
		}
	}
	return out
}

func statuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		s := &in[i]
		out[i] = corev1.ContainerStatus{Name: intern(s.Name), ContainerID: s.ContainerID, RestartCount: s.RestartCount, Started: s.Started}
		if r := s.State.Running; r != nil {
			out[i].State.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
		}
	}
	return out
}

// unreadConditions are the pod conditions no controller here reads. PodScheduled is read only
// while it is not True (a pod the scheduler cannot place, heartbeat's served-node-wait).
var unreadConditions = map[corev1.PodConditionType]bool{
	corev1.ContainersReady: true, corev1.PodScheduled: true, corev1.PodReadyToStartContainers: true,
}

func unread(c *corev1.PodCondition) bool {
	return unreadConditions[c.Type] && (c.Type != corev1.PodScheduled || c.Status == corev1.ConditionTrue)
}

func conditions(in []corev1.PodCondition) []corev1.PodCondition {
	if in == nil {
		return nil
	}
	n := 0
	for i := range in {
		if !unread(&in[i]) {
			n++
		}
	}
	out := make([]corev1.PodCondition, 0, n) // exactly: the cache holds it for the pod's life
	for _, c := range in {
		if unread(&c) {
			continue
		}
		c.Type, c.Status, c.Reason = corev1.PodConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
		out = append(out, c)
	}
	return out
}

// internMap returns a copy of m without key drop, its keys and values interned.
func internMap(m map[string]string, drop string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k != drop {
			out[intern(k)] = intern(v)
		}
	}
	return out
}

// intern returns the one copy of s the process holds (unique.Make): equal strings of many
// cached pods share their bytes.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}
