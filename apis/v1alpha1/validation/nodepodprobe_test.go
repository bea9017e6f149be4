// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// nodeProbes is a valid NodePodProbe with two pods, as the cluster controller writes it.
func nodeProbes() *v1alpha1.NodePodProbe {
	return &v1alpha1.NodePodProbe{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{
			Name: "web-0", Namespace: "shop", UID: "0b8a5e8c-1111-4f0e-9c1e-000000000001", IP: "10.244.1.7",
			Probes: []v1alpha1.ContainerProbe{{
				Name: "web-probes#healthy", ContainerName: "web",
				Probe: v1alpha1.ContainerProbeSpec{Probe: httpProbe("/healthz", intstr.FromString("http"), hostHeader("10.244.1.7:8080"))},
			}, {
				Name: "web-probes#warm", ContainerName: "web",
				Probe: v1alpha1.ContainerProbeSpec{Probe: execProbe("cat", "/tmp/warm")},
			}},
		}, {
			Name: "db-0", Namespace: "shop", UID: "0b8a5e8c-1111-4f0e-9c1e-000000000002", IP: "fd00::2",
			Probes: []v1alpha1.ContainerProbe{{
				Name: "db-probes#up", ContainerName: "postgres",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}}}},
			}},
		}}},
	}
}

func TestValidateNodePodProbe(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.NodePodProbe)
		want   []wantErr
	}{
		// Accepted.
		{name: "two pods", mutate: func(*v1alpha1.NodePodProbe) {}},
		{name: "no pods", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes = nil }},
		{name: "pod without probes", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[1].Probes = nil }},
		{name: "pod without IP yet", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[1].IP = "" }},
		{name: "same probe name in two pods", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[1].Probes[0].Name = "web-probes#healthy" }},
		{name: "Host header naming the IPv6 pod", mutate: func(n *v1alpha1.NodePodProbe) {
			n.Spec.PodProbes[1].Probes[0].Probe.Probe = httpProbe("/", intstr.FromInt32(80), hostHeader("[fd00::2]:80"))
		}},

		// Pod identity.
		{name: "duplicate uid", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[1].UID = n.Spec.PodProbes[0].UID }, want: []wantErr{
			duplicate("spec.podProbes[1].uid")}},
		{name: "pod identity missing", mutate: func(n *v1alpha1.NodePodProbe) {
			n.Spec.PodProbes[0].Name, n.Spec.PodProbes[0].Namespace, n.Spec.PodProbes[0].UID = "", "", ""
		}, want: []wantErr{
			required("spec.podProbes[0].name", "the pod's name"),
			required("spec.podProbes[0].namespace", "the pod's namespace"),
			required("spec.podProbes[0].uid", "the pod's UID")}},
		{name: "bad IP", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[0].IP = "10.244.1" }, want: []wantErr{
			invalid("spec.podProbes[0].IP", "must be the pod's IP address")}},

		// Probes.
		{name: "probe name empty", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[0].Probes[1].Name = "" }, want: []wantErr{
			required("spec.podProbes[0].probes[1].name", "a probe name, unique within the pod")}},
		{name: "probe name repeated in a pod", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[0].Probes[1].Name = "web-probes#healthy" }, want: []wantErr{
			duplicate("spec.podProbes[0].probes[1].name")}},
		{name: "container name empty", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[1].Probes[0].ContainerName = "" }, want: []wantErr{
			required("spec.podProbes[1].probes[0].containerName", "")}},
		{name: "probe spec checked", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[0].Probes[1].Probe.Probe = corev1.Probe{} }, want: []wantErr{
			required("spec.podProbes[0].probes[1].probe", "exactly one of exec, httpGet, tcpSocket or grpc")}},

		// The node service must refuse anything aimed elsewhere than the pod.
		{name: "httpGet host", mutate: func(n *v1alpha1.NodePodProbe) { n.Spec.PodProbes[0].Probes[0].Probe.HTTPGet.Host = "10.244.1.1" }, want: []wantErr{
			forbidden("spec.podProbes[0].probes[0].probe.httpGet.host", "must be empty (the probe goes to the pod's IP) or name the pod's own loopback")}},
		{name: "tcpSocket host", mutate: func(n *v1alpha1.NodePodProbe) {
			n.Spec.PodProbes[1].Probes[0].Probe.TCPSocket.Host = "kubernetes.default"
		}, want: []wantErr{
			forbidden("spec.podProbes[1].probes[0].probe.tcpSocket.host", "")}},
		// A Host header only sets the header (prober.TestHTTPHostHeaderNeverRedirects).
		{name: "Host header naming a virtual host", mutate: func(n *v1alpha1.NodePodProbe) {
			n.Spec.PodProbes[0].Probes[0].Probe.HTTPGet.HTTPHeaders[0].Value = "10.244.1.8:8080"
		}},
		{name: "Host header not a host", mutate: func(n *v1alpha1.NodePodProbe) {
			n.Spec.PodProbes[1].Probes[0].Probe.Probe = httpProbe("/", intstr.FromInt32(80), hostHeader("a b"))
		}, want: []wantErr{invalid("spec.podProbes[1].probes[0].probe.httpGet.httpHeaders[0].value", "a Host header must be a host name or IP address")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := nodeProbes()
			tc.mutate(n)
			checkErrs(t, ValidateNodePodProbe(n), tc.want...)
		})
	}
}

// The node service validates entry by entry so one bad pod does not stop the others.
func TestValidatePodProbeEntry(t *testing.T) {
	n := nodeProbes()
	n.Spec.PodProbes[0].Probes[0].Probe.HTTPGet.Host = "169.254.169.254"
	checkErrs(t, ValidatePodProbe(&n.Spec.PodProbes[0], nil), forbidden("probes[0].probe.httpGet.host", ""))
	checkErrs(t, ValidatePodProbe(&n.Spec.PodProbes[1], nil))
}
