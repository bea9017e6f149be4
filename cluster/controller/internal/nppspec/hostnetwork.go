// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// CheckHostNetwork returns why a marker's network probe (after ResolvePorts) may not go to pod,
// or nil. A hostNetwork pod shares the node's network: its IP is the node's, and every port
// there is a port of the node. So a marker probe of such a pod goes only to a port the pod
// declares (a containerPort of any of its containers), and never to loopback, which is the
// node's own (the node service refuses that too).
func CheckHostNetwork(probe *corev1.Probe, pod *corev1.Pod) error {
	if !pod.Spec.HostNetwork {
		return nil
	}
	if validation.NamesLoopback(&probe.ProbeHandler) {
		return fmt.Errorf("pod %s uses the host network, whose loopback is the node's: probes of it may not name 127.0.0.1 or localhost", pod.Name)
	}
	var port int32
	switch {
	case probe.HTTPGet != nil:
		port = probe.HTTPGet.Port.IntVal
	case probe.TCPSocket != nil:
		port = probe.TCPSocket.Port.IntVal
	case probe.GRPC != nil:
		port = probe.GRPC.Port
	default:
		return nil // exec
	}
	if !declares(pod, port) {
		return fmt.Errorf("pod %s uses the host network: a marker probe may only go to a port the pod declares in a containerPort, and %d is not one", pod.Name, port)
	}
	return nil
}

func declares(pod *corev1.Pod, port int32) bool {
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
