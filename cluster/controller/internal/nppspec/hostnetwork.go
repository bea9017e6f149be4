// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// CheckHostNetwork returns why a marker's network probe (after ResolvePorts) may not go to pod,
// or nil. A hostNetwork pod shares the node's network: its IP is the node's, and every port
// there is a port of the node. So a marker probe of such a pod goes only to a port the pod
// declares (a containerPort of any of its containers), at its IP or, when the probe names it,
// at its loopback, which is the node's: the pod's own processes reach it, and so does whoever
// may port-forward to the pod, which admission checks before a marker may name loopback.
func CheckHostNetwork(probe *corev1.Probe, pod *corev1.Pod) error {
	if !pod.Spec.HostNetwork {
		return nil
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
	if !v1alpha1.DeclaresTCPPort(pod, port) {
		return fmt.Errorf("pod %s uses the host network: a marker probe may only go to a port the pod declares in a containerPort, and %d is not one", pod.Name, port)
	}
	return nil
}
