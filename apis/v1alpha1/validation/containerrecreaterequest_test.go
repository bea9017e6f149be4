// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

const crrPodIP = "10.244.2.9"

// recreate is a valid ContainerRecreateRequest with every optional part set.
func recreate() *v1alpha1.ContainerRecreateRequest {
	return &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0-restart", Namespace: "shop"},
		Spec: v1alpha1.ContainerRecreateRequestSpec{
			PodName: "web-0",
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{
				Name: "web",
				PreStop: &v1alpha1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/drain", Port: intstr.FromString("http"),
					HTTPHeaders: []corev1.HTTPHeader{hostHeader(crrPodIP)}}},
				Ports:         []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://4f1c2a", RestartCount: 2},
			}, {
				Name:    "sidecar",
				PreStop: &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/drain"}}},
			}},
			Strategy: &v1alpha1.ContainerRecreateRequestStrategy{
				FailurePolicy:                 v1alpha1.ContainerRecreateRequestFailurePolicyIgnore,
				OrderedRecreate:               true,
				TerminationGracePeriodSeconds: ptr[int64](30),
				UnreadyGracePeriodSeconds:     ptr[int64](5),
				MinStartedSeconds:             10,
			},
			ActiveDeadlineSeconds:   ptr[int64](300),
			TTLSecondsAfterFinished: ptr[int32](600),
		},
	}
}

func TestValidateContainerRecreateRequest(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.ContainerRecreateRequest)
		want   []wantErr
	}{
		// Accepted.
		{name: "full", mutate: func(*v1alpha1.ContainerRecreateRequest) {}},
		{name: "minimal", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec = v1alpha1.ContainerRecreateRequestSpec{PodName: "web-0", Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "web"}}}
		}},
		{name: "zero durations", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Strategy.TerminationGracePeriodSeconds, c.Spec.Strategy.UnreadyGracePeriodSeconds = ptr[int64](0), ptr[int64](0)
			c.Spec.TTLSecondsAfterFinished = ptr[int32](0)
		}},
		{name: "shortest deadline", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = ptr[int64](3) }},
		{name: "failure policy Fail", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Strategy.FailurePolicy = "Fail" }},
		{name: "container not started yet", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].StatusContext.ContainerID = "" }},

		// Pod and containers.
		{name: "no pod name", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "" }, want: []wantErr{
			required("spec.podName", "the name of the pod whose containers to recreate")}},
		{name: "no containers", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers = nil }, want: []wantErr{
			required("spec.containers", "list at least one container to recreate")}},
		{name: "container name empty", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[1].Name = "" }, want: []wantErr{
			required("spec.containers[1].name", "the name of a container in the pod")}},
		{name: "container listed twice", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[1].Name = "web" }, want: []wantErr{
			duplicate("spec.containers[1].name")}},

		// Durations.
		{name: "deadline too short", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = ptr[int64](2) }, want: []wantErr{
			invalid("spec.activeDeadlineSeconds", "must be at least 3 seconds; leave it unset for no deadline")}},
		{name: "deadline negative", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = ptr[int64](-1) }, want: []wantErr{
			invalid("spec.activeDeadlineSeconds", "must be at least 3 seconds")}},
		{name: "negative durations", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.TTLSecondsAfterFinished = ptr[int32](-1)
			c.Spec.Strategy.TerminationGracePeriodSeconds = ptr[int64](-1)
			c.Spec.Strategy.UnreadyGracePeriodSeconds = ptr[int64](-1)
			c.Spec.Strategy.MinStartedSeconds = -1
		}, want: []wantErr{
			invalid("spec.strategy.terminationGracePeriodSeconds", "must be greater than or equal to 0"),
			invalid("spec.strategy.unreadyGracePeriodSeconds", "must be greater than or equal to 0"),
			invalid("spec.strategy.minStartedSeconds", "must be greater than or equal to 0"),
			invalid("spec.ttlSecondsAfterFinished", "must be greater than or equal to 0")}},
		{name: "failure policy unknown", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Strategy.FailurePolicy = "Retry" }, want: []wantErr{
			notSupported("spec.strategy.failurePolicy", `supported values: "Fail", "Ignore"`)}},

		// preStop, ports, status context.
		{name: "preStop empty", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].PreStop = &v1alpha1.ProbeHandler{} }, want: []wantErr{
			required("spec.containers[0].preStop", "exactly one of exec, httpGet or tcpSocket must be set; omit preStop for none")}},
		{name: "preStop two handlers", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[1].PreStop.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}
		}, want: []wantErr{forbidden("spec.containers[1].preStop.tcpSocket", "exec is already set")}},
		{name: "preStop exec without command", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[1].PreStop.Exec.Command = nil }, want: []wantErr{
			required("spec.containers[1].preStop.exec.command", "")}},
		{name: "preStop httpGet host", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].PreStop.HTTPGet.Host = "169.254.169.254"
		}, want: []wantErr{
			forbidden("spec.containers[0].preStop.httpGet.host", "must be empty (the probe goes to the pod's IP) or name the pod's own loopback")}},
		{name: "preStop Host header naming a virtual host", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].PreStop.HTTPGet.HTTPHeaders[0].Value = "shutdown.example.com"
		}},
		{name: "preStop h2c", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			h2 := corev1.HTTPProtocolHTTP2
			c.Spec.Containers[0].PreStop.HTTPGet.Protocol = &h2
		}, want: []wantErr{forbidden("spec.containers[0].preStop.httpGet.protocol", "the kubelet runs lifecycle hooks over HTTP/1.1")}},
		{name: "preStop path without a slash", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].PreStop.HTTPGet.Path = "shutdown" }},
		{name: "preStop Host header with user info", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].PreStop.HTTPGet.HTTPHeaders[0].Value = "a@example.com"
		}, want: []wantErr{invalid("spec.containers[0].preStop.httpGet.httpHeaders[0].value", "a Host header must be a host name or IP address")}},
		{name: "preStop tcpSocket bad port", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[1].PreStop = &v1alpha1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(0)}}
		}, want: []wantErr{required("spec.containers[1].preStop.tcpSocket.port", "")}},
		{name: "bad ports", mutate: func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].Ports = append(c.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "http_alt", ContainerPort: 0, Protocol: "HTTP"})
		}, want: []wantErr{
			invalid("spec.containers[0].ports[1].containerPort", "must be between 1 and 65535, inclusive"),
			invalid("spec.containers[0].ports[1].name", "must contain only alpha-numeric characters"),
			notSupported("spec.containers[0].ports[1].protocol", `supported values: "TCP", "UDP", "SCTP"`)}},
		{name: "bad container ID", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].StatusContext.ContainerID = "4f1c2a" }, want: []wantErr{
			invalid("spec.containers[0].statusContext.containerID", "must be <runtime>://<id> as in the pod status")}},
		{name: "negative restart count", mutate: func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].StatusContext.RestartCount = -1 }, want: []wantErr{
			invalid("spec.containers[0].statusContext.restartCount", "must be greater than or equal to 0")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := recreate()
			tc.mutate(c)
			checkErrs(t, ValidateContainerRecreateRequest(c, crrPodIP), tc.want...)
		})
	}
}

// A preStop Host header names a virtual host, as the kubelet allows: it only sets the header, so
// the pod IP need not be known to accept it.
func TestValidateContainerRecreateRequestUnknownPodIP(t *testing.T) {
	c := recreate()
	c.Spec.Containers[0].PreStop.HTTPGet.HTTPHeaders[0].Value = "shutdown.example.com"
	checkErrs(t, ValidateContainerRecreateRequest(c, ""))
}
