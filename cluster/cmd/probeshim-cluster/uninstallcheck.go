// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

const uninstallCheckUsage = `usage: probeshim-cluster uninstall-check

Says whether uninstalling the cluster part would leave pods without liveness: pods that opted in to
enhanced liveness had their livenessProbe moved off the kubelet, and without the cluster part nothing
restarts them. Exits 1, naming them, when there are such pods; 0 when there are none. The Helm chart
runs it as a pre-delete hook (uninstallGuard), so that helm uninstall refuses while such pods run.
It reads only; the kubeconfig's user (in the hook, the deployment's service account) needs list on pods
in every namespace.
`

// maxNamedPods is how many of the unprotected pods the check names.
const maxNamedPods = 10

func uninstallCheckSubcommand() (code int, ok bool) {
	if len(os.Args) < 2 || os.Args[1] != "uninstall-check" {
		return 0, false
	}
	return runUninstallCheck(context.Background(), os.Args[2:], os.Stdout, os.Stderr, ctrl.GetConfig), true
}

func runUninstallCheck(ctx context.Context, args []string, out, errOut io.Writer, cfg func() (*rest.Config, error)) int {
	if helpAsked(args) {
		fmt.Fprint(out, uninstallCheckUsage)
		return 0
	}
	if len(args) != 0 {
		fmt.Fprint(errOut, uninstallCheckUsage)
		return 2
	}
	kc, err := clientOf(cfg)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var pods []string
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := kc.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			fmt.Fprintln(errOut, "listing pods:", err)
			return 1
		}
		for i := range list.Items {
			if p := &list.Items[i]; livenessMoved(p) {
				pods = append(pods, p.Namespace+"/"+p.Name)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	if len(pods) == 0 {
		fmt.Fprintln(out, "no pod depends on probeshim for its liveness: the cluster part may be uninstalled")
		return 0
	}
	named := strings.Join(pods[:min(len(pods), maxNamedPods)], ", ")
	if len(pods) > maxNamedPods {
		named += fmt.Sprintf(" and %d more", len(pods)-maxNamedPods)
	}
	fmt.Fprintf(out, "refusing: %d pods that opted in to enhanced liveness would be left without any liveness probe "+
		"(their livenessProbe was moved off the kubelet, and nothing would restart them): %s. "+
		"Recreate them without the annotation %s first (their workloads give them back their livenessProbe), "+
		"or uninstall anyway: helm uninstall --no-hooks, or helm upgrade --set uninstallGuard.enabled=false first.\n",
		len(pods), named, v1alpha1.AnnotationUsingEnhancedLiveness)
	return 1
}

// livenessMoved: the pod has not finished, and the webhook moved a liveness probe of its off the kubelet.
func livenessMoved(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
		!v1alpha1.UsesEnhancedLiveness(p) {
		return false
	}
	moved := p.Annotations[v1alpha1.AnnotationContainerProbeContext]
	if moved == "" {
		return false
	}
	probes, err := v1alpha1.ParseContainerProbeContext(moved)
	return err != nil || len(probes) > 0 // unreadable: it may well have had one
}
