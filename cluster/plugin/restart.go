// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/termsafe"
)

// restartTTL keeps a finished request an hour for `kubectl get crr`, then the lifecycle
// controller removes it.
const restartTTL = 3600

// RestartOptions say what to restart.
type RestartOptions struct {
	Namespace, Pod string
	// Containers to restart; none: every container of the pod spec.
	Containers []string
	// Timeout bounds the wait, and is the request's activeDeadlineSeconds, so a request no one
	// waits for any more does not run on.
	Timeout time.Duration
	// PollInterval is how often the request is read (a second when zero).
	PollInterval time.Duration
	// Out gets the progress and the results.
	Out io.Writer
}

// RestartContainers creates the request, waits for it and prints the outcome; the error says what failed.
func RestartContainers(ctx context.Context, c client.Client, o RestartOptions) error {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Pod}, pod); err != nil {
		return fmt.Errorf("pod %s/%s: %w", o.Namespace, o.Pod, err)
	}
	containers := o.Containers
	if len(containers) == 0 {
		for _, ct := range pod.Spec.Containers {
			containers = append(containers, ct.Name)
		}
	}
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Namespace,
			// Kubernetes' own suffix keeps the name within 63 characters for any pod name.
			GenerateName: truncate(o.Pod, 40) + "-restart-",
			Annotations:  map[string]string{v1alpha1.AnnotationCRRReason: "requested with kubectl probeshim restart"},
			// Garbage collected with the pod, as the decider's requests are.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: v1alpha1.ContainerRecreateRequestSpec{
			PodName:                 pod.Name,
			ActiveDeadlineSeconds:   ptr.To(int64(o.Timeout / time.Second)),
			TTLSecondsAfterFinished: ptr.To(int32(restartTTL)),
		},
	}
	for _, name := range containers {
		crr.Spec.Containers = append(crr.Spec.Containers, v1alpha1.ContainerRecreateRequestContainer{Name: name})
	}
	if err := c.Create(ctx, crr); err != nil {
		return fmt.Errorf("creating a ContainerRecreateRequest for pod %s/%s: %w", o.Namespace, o.Pod, err)
	}
	fmt.Fprintf(o.Out, "containerrecreaterequest/%s created for pod %s/%s (%s); waiting up to %s\n",
		crr.Name, o.Namespace, o.Pod, strings.Join(containers, ", "), o.Timeout)

	interval := o.PollInterval
	if interval <= 0 {
		interval = time.Second
	}
	var last *v1alpha1.ContainerRecreateRequest
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, interval, o.Timeout, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.ContainerRecreateRequest{}
		if lastErr = c.Get(ctx, client.ObjectKeyFromObject(crr), got); lastErr != nil {
			return false, nil // the API server may blink; the timeout bounds the wait
		}
		last = got
		return got.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted, nil
	})
	if last == nil {
		return fmt.Errorf("containerrecreaterequest/%s could not be read: %w", crr.Name, errors.Join(lastErr, err))
	}
	failed := printRestart(o.Out, last)
	switch {
	case err != nil:
		return fmt.Errorf("containerrecreaterequest/%s did not complete within %s (phase %q)", crr.Name, o.Timeout, last.Status.Phase)
	case failed > 0:
		return fmt.Errorf("containerrecreaterequest/%s: %d of %d container(s) not recreated", crr.Name, failed, len(last.Spec.Containers))
	}
	return nil
}

// printRestart writes each container's result and returns how many were not recreated.
func printRestart(w io.Writer, crr *v1alpha1.ContainerRecreateRequest) int {
	phase := string(crr.Status.Phase)
	if phase == "" {
		phase = "not started (no node service has picked it up)"
	}
	fmt.Fprintf(w, "phase: %s", phase)
	if crr.Status.Message != "" {
		fmt.Fprintf(w, ": %s", termsafe.Escape(crr.Status.Message))
	}
	fmt.Fprintln(w)
	states := map[string]v1alpha1.ContainerRecreateRequestContainerRecreateState{}
	for _, s := range crr.Status.ContainerRecreateStates {
		states[s.Name] = s
	}
	failed := 0
	for _, ct := range crr.Spec.Containers {
		s, ok := states[ct.Name]
		result := string(s.Phase)
		if !ok || result == "" {
			result = "no result"
		}
		if s.Message != "" {
			result += ": " + termsafe.Escape(s.Message)
		}
		if s.Phase != v1alpha1.ContainerRecreateRequestSucceeded {
			failed++
		}
		fmt.Fprintf(w, "  %s: %s\n", ct.Name, result)
	}
	return failed
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.TrimRight(s[:n], "-.")
}
