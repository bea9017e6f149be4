// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// transformPod is the pod informer's transform: pods are cached slim.
func transformPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return slimPod(p), nil
	}
	return obj, nil
}

// slimPod is the part of a pod the executor reads, for its informer's cache: who the pod is and
// where it runs, each container's name, ports, preStop hook and restart policy, the restart
// policy and grace period, and the pod IP and container statuses. A realistic pod (env, mounts,
// resources, probes, labels, annotations, volumes, tolerations) is about 15 KB of heap without
// its managed fields and 4 KB slimmed this way; the node caches every pod bound to it (issue 20).
func slimPod(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:                      p.Spec.NodeName,
			HostNetwork:                   p.Spec.HostNetwork,
			RestartPolicy:                 p.Spec.RestartPolicy,
			TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds,
			Containers:                    slimContainers(p.Spec.Containers),
			InitContainers:                slimContainers(p.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			Phase:                 p.Status.Phase,
			PodIP:                 p.Status.PodIP,
			PodIPs:                p.Status.PodIPs,
			ContainerStatuses:     p.Status.ContainerStatuses,
			InitContainerStatuses: p.Status.InitContainerStatuses,
		},
	}
}

func slimContainers(in []corev1.Container) []corev1.Container {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i, c := range in {
		out[i] = corev1.Container{Name: c.Name, Ports: c.Ports, Lifecycle: c.Lifecycle, RestartPolicy: c.RestartPolicy}
	}
	return out
}
