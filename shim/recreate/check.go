// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
)

// refusal says why the node will not act on a request for pod, or "" when it may. The node finds
// the pod by the request's pod-uid label, which whoever wrote the request chose: without the
// admission webhook (not installed yet, or a cluster moving over from OpenKruise) that label could
// name a pod of another namespace. So the pod must be the one the request names — same namespace,
// same name, this node, the label's UID — every named container must be one the kubelet restarts,
// and the request and the pod's preStop hooks must pass the shared validation. The message names
// only what the request's author wrote, never the other pod's namespace.
func refusal(crr *v1alpha1.ContainerRecreateRequest, pod *corev1.Pod, node string) string {
	if pod.Namespace != crr.Namespace || pod.Name != crr.Spec.PodName || string(pod.UID) != crr.Labels[v1alpha1.LabelCRRPodUID] {
		return fmt.Sprintf("label %s=%s does not name pod %s/%s on node %s",
			v1alpha1.LabelCRRPodUID, crr.Labels[v1alpha1.LabelCRRPodUID], crr.Namespace, crr.Spec.PodName, node)
	}
	if pod.Spec.NodeName != node || crr.Labels[v1alpha1.LabelCRRNodeName] != node {
		return fmt.Sprintf("pod %s/%s is not bound to node %s", pod.Namespace, pod.Name, node)
	}
	var msgs []string
	podPath := field.NewPath("pod", "spec", "containers") // the pod's own hook, named by container
	for _, e := range validation.ValidateContainerRecreateRequest(crr, pod.Status.PodIP) {
		msgs = append(msgs, e.Error())
	}
	for i := range crr.Spec.Containers {
		name := crr.Spec.Containers[i].Name
		c := v1alpha1.RestartableContainer(pod, name)
		if c == nil {
			msgs = append(msgs, fmt.Sprintf("spec.containers[%d].name: pod %s has no container %q that the kubelet restarts", i, pod.Name, name))
			continue
		}
		if h := preStopOf(c); h != nil {
			for _, e := range validation.ValidatePodPreStop(h, podPath.Key(name).Child("lifecycle", "preStop")) {
				msgs = append(msgs, e.Error())
			}
		}
	}
	return strings.Join(msgs, "; ")
}

// hookOf is the preStop hook the node runs for a container, and the ports it may name: the
// pod's own lifecycle.preStop, never the request's copy. Admission copies the pod's hook into
// the request, but a request written past admission could carry any command; the pod's spec is
// what its owner declared and what the kubelet would run on any stop. A sleep hook is not run
// (admission warns about it).
func hookOf(pod *corev1.Pod, name string) (*v1alpha1.ProbeHandler, []corev1.ContainerPort) {
	c := v1alpha1.RestartableContainer(pod, name)
	if c == nil {
		return nil, nil
	}
	h := preStopOf(c)
	if h == nil {
		return nil, nil
	}
	return h, c.Ports
}

func preStopOf(c *corev1.Container) *v1alpha1.ProbeHandler {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return nil
	}
	h := c.Lifecycle.PreStop
	if h.Exec == nil && h.HTTPGet == nil && h.TCPSocket == nil {
		return nil
	}
	return &v1alpha1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}
}

// maxRefusal caps a refusal message: the validation of a request with many containers can say a
// lot, and the message lands in the request's status.
const maxRefusal = 1024

func capMessage(s string) string {
	if len(s) <= maxRefusal {
		return s
	}
	return strings.ToValidUTF8(s[:maxRefusal], "") + "..."
}
