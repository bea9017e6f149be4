// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestNamesLoopback(t *testing.T) {
	for _, tc := range []struct {
		h    corev1.ProbeHandler
		want bool
	}{
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}, false},
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(80)}}, true},
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.1.2.3", Port: intstr.FromInt32(80)}}, true},
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "localhost", Port: intstr.FromInt32(80)}}, true},
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "::ffff:127.0.0.1", Port: intstr.FromInt32(80)}}, true},
		{corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80),
			HTTPHeaders: []corev1.HTTPHeader{{Name: "Host", Value: "localhost"}}}}, false}, // a header is not where it connects
		{corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "::1", Port: intstr.FromInt32(80)}}, true},
		{corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(80)}}, false},
		{corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "localhost.example.com", Port: intstr.FromInt32(80)}}, false},
		{corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}, false},
		{corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, false},
	} {
		if got := NamesLoopback(&tc.h); got != tc.want {
			t.Errorf("NamesLoopback(%+v) = %t, want %t", tc.h, got, tc.want)
		}
	}
}
