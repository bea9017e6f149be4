// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cli_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// restart creates a request for the pod's containers (all, or those -c names), waits while the
// node (here the test) carries it out, prints each container's result, and fails when a container
// was not recreated or the request did not complete in time.
func TestRestart(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	c := testEnv.c
	ns := namespace(t, "restart-shop")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0"}, Spec: corev1.PodSpec{NodeName: "rs-node",
		Containers: []corev1.Container{{Name: "app", Image: "busybox"}, {Name: "sidecar", Image: "busybox"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// node completes the one request of the pod not yet seen, with the container phases given.
	seen := map[string]bool{}
	node := func(t *testing.T, phases map[string]v1alpha1.ContainerRecreateRequestPhase) *v1alpha1.ContainerRecreateRequest {
		t.Helper()
		var crr *v1alpha1.ContainerRecreateRequest
		if err := poll.Until(ctx, 20*time.Second, "a new request", func(ctx context.Context) (bool, string, error) {
			var list v1alpha1.ContainerRecreateRequestList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err.Error(), nil
			}
			for i := range list.Items {
				if !seen[list.Items[i].Name] {
					crr = &list.Items[i]
					seen[crr.Name] = true
					return true, "", nil
				}
			}
			return false, "none", nil
		}); err != nil {
			t.Error(err)
			return nil
		}
		if phases == nil {
			return crr
		}
		crr.Status.Phase = v1alpha1.ContainerRecreateRequestCompleted
		crr.Status.CompletionTime = &metav1.Time{Time: time.Now()}
		for _, ct := range crr.Spec.Containers {
			st := v1alpha1.ContainerRecreateRequestContainerRecreateState{Name: ct.Name, Phase: phases[ct.Name]}
			if st.Phase != v1alpha1.ContainerRecreateRequestSucceeded {
				st.Message = "not recreated: the preStop hook failed"
			}
			crr.Status.ContainerRecreateStates = append(crr.Status.ContainerRecreateStates, st)
		}
		if err := c.Status().Update(ctx, crr); err != nil {
			t.Error(err)
		}
		return crr
	}
	type result struct {
		out string
		err error
	}
	restart := func(args ...string) <-chan result {
		done := make(chan result, 1)
		go func() {
			out, _, err := kubectl(t, "", append([]string{"restart", "-n", ns}, args...)...)
			done <- result{out, err}
		}()
		return done
	}

	// Every container, both recreated.
	done := restart("pod/web-0")
	crr := node(t, map[string]v1alpha1.ContainerRecreateRequestPhase{"app": v1alpha1.ContainerRecreateRequestSucceeded, "sidecar": v1alpha1.ContainerRecreateRequestSucceeded})
	r := <-done
	if r.err != nil {
		t.Fatalf("%v:\n%s", r.err, r.out)
	}
	contains(t, r.out, "containerrecreaterequest/"+crr.Name+" created for pod restart-shop/web-0 (app, sidecar); waiting up to 5m0s",
		"phase: Completed", "  app: Succeeded", "  sidecar: Succeeded")
	var names []string
	for _, ct := range crr.Spec.Containers {
		names = append(names, ct.Name)
	}
	if !slices.Equal(names, []string{"app", "sidecar"}) || crr.Spec.PodName != "web-0" || crr.Spec.ActiveDeadlineSeconds == nil ||
		*crr.Spec.ActiveDeadlineSeconds != 300 || !strings.HasPrefix(crr.Name, "web-0-restart-") || len(crr.OwnerReferences) != 1 ||
		crr.OwnerReferences[0].UID != pod.UID {
		t.Errorf("request: %+v", crr)
	}

	// One container, not recreated: exit 1.
	done = restart("web-0", "-c", "sidecar")
	crr = node(t, map[string]v1alpha1.ContainerRecreateRequestPhase{"sidecar": v1alpha1.ContainerRecreateRequestFailed})
	r = <-done
	if r.err == nil || !strings.Contains(r.err.Error(), "1 of 1 container(s) not recreated") {
		t.Errorf("a failed restart: %v", r.err)
	}
	contains(t, r.out, "  sidecar: Failed: not recreated: the preStop hook failed")
	if len(crr.Spec.Containers) != 1 || crr.Spec.Containers[0].Name != "sidecar" {
		t.Errorf("-c sidecar: %+v", crr.Spec.Containers)
	}

	// No node service takes it up: the wait ends at --timeout.
	done = restart("web-0", "--timeout", "3s")
	node(t, nil)
	r = <-done
	if r.err == nil || !strings.Contains(r.err.Error(), "did not complete within 3s") {
		t.Errorf("a request no one carries out: %v", r.err)
	}
	contains(t, r.out, "phase: not started (no node service has picked it up)", "  app: no result")

	if _, _, err := kubectl(t, "", "restart", "-n", ns, "nope"); err == nil || !strings.Contains(err.Error(), `pods "nope" not found`) {
		t.Errorf("a missing pod: %v", err)
	}
}

// The shell completion: cobra's scripts, and pod names for explain and restart from the API server.
func TestCompletion(t *testing.T) {
	needEnv(t)
	ns := namespace(t, "complete-shop")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	if err := testEnv.c.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	out, _, err := kubectl(t, "", "completion", "bash")
	if err != nil || !strings.Contains(out, "__start_kubectl-probeshim") {
		t.Errorf("completion bash: %v\n%.300s", err, out)
	}
	for _, sub := range []string{"explain", "restart"} {
		out, _, err := kubectl(t, "", "__complete", sub, "-n", ns, "")
		if err != nil || !strings.HasPrefix(out, "web-0\n") {
			t.Errorf("completing %s: %v\n%s", sub, err, out)
		}
	}
}
