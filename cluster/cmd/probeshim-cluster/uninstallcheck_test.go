// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// uninstall-check, against a real API server, refuses while pods whose liveness probe was moved
// off the kubelet run (naming them, over pages of the pod list), and lets go when none does:
// pods that opted in without a liveness probe, and finished pods, do not count.
func TestUninstallCheck(t *testing.T) {
	cfg, _ := startAPIServer(t)
	kc := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	create := func(name string, annotations map[string]string, phase corev1.PodPhase) *corev1.Pod {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
		pod, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if phase != "" {
			pod.Status.Phase = phase
			if pod, err = kc.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return pod
	}
	moved := map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true",
		v1alpha1.AnnotationContainerProbeContext: `[{"name":"app","livenessProbe":{"tcpSocket":{"port":80}}}]`}
	run := func() (int, string) {
		var out, errOut bytes.Buffer
		code := runUninstallCheck(ctx, nil, &out, &errOut, func() (*rest.Config, error) { return cfg, nil })
		return code, out.String() + errOut.String()
	}

	create("plain", nil, "")
	create("opted-in-no-probe", map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}, "")
	create("finished", moved, corev1.PodSucceeded)
	if code, out := run(); code != 0 || !strings.Contains(out, "may be uninstalled") {
		t.Fatalf("no pod depends on probeshim: exit %d, %q", code, out)
	}
	var names []string
	for i := range 12 {
		names = append(names, create(fmt.Sprintf("web-%02d", i), moved, "").Name)
	}
	code, out := run()
	if code != 1 || !strings.Contains(out, "refusing: 12 pods that opted in to enhanced liveness") ||
		!strings.Contains(out, "default/web-00") || !strings.Contains(out, "and 2 more") || !strings.Contains(out, "helm uninstall --no-hooks") {
		t.Fatalf("12 pods depend on probeshim: exit %d, %q", code, out)
	}
	if strings.Contains(out, "finished") || strings.Contains(out, "opted-in-no-probe") {
		t.Errorf("names pods that do not depend on probeshim: %q", out)
	}
	for _, n := range names {
		if err := kc.CoreV1().Pods("default").Delete(ctx, n, *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := run(); code != 0 {
		t.Fatalf("after the pods went: exit %d, %q", code, out)
	}
}
