// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import corev1 "k8s.io/api/core/v1"

// DeclaresTCPPort reports whether a container or init container of pod declares port as a TCP
// containerPort. A marker's network probe of a hostNetwork pod goes only to such a port: every
// port there is a port of the node, and only those the pod claims are the pod's. The cluster part
// leaves other probes out of NodePodProbe and the node service refuses them.
func DeclaresTCPPort(pod *corev1.Pod, port int32) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			for _, p := range list[i].Ports {
				if p.ContainerPort == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
					return true
				}
			}
		}
	}
	return false
}
