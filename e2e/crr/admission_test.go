// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package crr

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/framework"
)

// Every rejection of admission, through the rig's API server, against pods a real kubelet runs.
func (s *suite) admission(t *testing.T) {
	ns := s.c.Namespace(t)
	ctx := framework.Context(t, 5*time.Minute)
	pod := s.runPod(t, ns, "adm", 1, nil, trap("main"))

	unscheduled := framework.NewPod(ns, "unscheduled", trap("main"))
	unscheduled.Spec.NodeSelector = map[string]string{"probeshim.io/no-such-node": "true"}
	s.c.CreatePod(t, unscheduled)

	finished := framework.NewPod(ns, "finished", framework.Command("main", "true"))
	finished.Spec.RestartPolicy = corev1.RestartPolicyNever
	s.c.CreatePod(t, finished)
	if _, err := s.c.WaitForPod(ctx, ns, "finished", time.Minute, "Succeeded", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded
	}); err != nil {
		t.Fatal(err)
	}

	blocked := framework.NewPod(ns, "blocked", trap("main"))
	blocked.Spec.InitContainers = []corev1.Container{framework.Command("init", "sleep", "1000000")}
	blocked.Spec.InitContainers[0].ImagePullPolicy = corev1.PullIfNotPresent
	s.c.CreatePod(t, blocked)
	if _, err := s.c.WaitForPod(ctx, ns, "blocked", time.Minute, "init running", func(p *corev1.Pod) bool {
		return len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].State.Running != nil
	}); err != nil {
		t.Fatal(err)
	}

	deleting := framework.NewPod(ns, "deleting", trap("main"))
	deleting.Finalizers = []string{"test.probeshim.io/hold"}
	deleting = s.runPod(t, ns, "deleting", 1, func(p *corev1.Pod) { p.Finalizers = deleting.Finalizers }, trap("main"))
	if err := s.c.Kube.CoreV1().Pods(ns).Delete(ctx, deleting.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = s.c.Kube.CoreV1().Pods(ns).Patch(context.Background(), "deleting", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	offHost := trap("main")
	offHost.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Host: "169.254.169.254", Path: "/latest/meta-data", Port: intstr.FromInt32(80)}}}
	s.runPod(t, ns, "offhost", 1, nil, offHost)

	const mutator = `admission webhook "containerrecreaterequests.mutate.probeshim.io" denied the request`
	cases := []struct {
		name string
		mut  func(*v1alpha1.ContainerRecreateRequest)
		msg  string
	}{
		{"pod missing", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "nope" }, "pod nope does not exist in namespace " + ns},
		{"pod not on a node", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "unscheduled" }, "pod unscheduled is not running on a node yet"},
		{"pod finished", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "finished" }, "pod finished has finished (phase Succeeded)"},
		{"pod being deleted", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "deleting" }, "pod deleting is being deleted"},
		{"unknown container", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].Name = "nginx" }, `spec.containers[0].name: Unsupported value: "nginx": supported values: "main"`},
		{"container not started", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "blocked" }, "container main of pod blocked has not started yet"},
		{"duplicate container", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers = append(c.Spec.Containers, c.Spec.Containers[0])
		},
			`spec.containers[1].name: Duplicate value: "main"`},
		{"no container", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers = nil }, "spec.containers: Required value"},
		{"activeDeadlineSeconds 2", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = ptr.To[int64](2) },
			"spec.activeDeadlineSeconds: Invalid value: 2: must be at least 3 seconds"},
		{"negative ttlSecondsAfterFinished", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			"spec.ttlSecondsAfterFinished: Invalid value: -1"},
		{"negative terminationGracePeriodSeconds", strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) {
			st.TerminationGracePeriodSeconds = ptr.To[int64](-1)
		}), "spec.strategy.terminationGracePeriodSeconds: Invalid value: -1"},
		{"negative unreadyGracePeriodSeconds", strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) {
			st.UnreadyGracePeriodSeconds = ptr.To[int64](-1)
		}), "spec.strategy.unreadyGracePeriodSeconds: Invalid value: -1"},
		{"negative minStartedSeconds", strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) { st.MinStartedSeconds = -1 }),
			"spec.strategy.minStartedSeconds: Invalid value: -1"},
		{"user-supplied preStop", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].PreStop = &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"rm", "-rf", "/"}}}
		}, "spec.containers[0].preStop: Forbidden: copied from the pod by admission"},
		{"user-supplied statusContext", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].StatusContext = &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://x"}
		}, "spec.containers[0].statusContext: Forbidden: copied from the pod by admission"},
		{"the pod's preStop names another host", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "offhost" },
			"the preStop hook of container main in the pod cannot be run by probeshim"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crr := &v1alpha1.ContainerRecreateRequest{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rejected"},
				Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name,
					Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "main"}}},
			}
			tc.mut(crr)
			err := s.c.Client.Create(ctx, crr)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), mutator) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("want %q from the mutating webhook, got %v", tc.msg, err)
			}
		})
	}

	// After creation the spec and the injected labels stay as they are.
	crr := s.create(t, pod, "immutable", []string{"main"}, func(r *v1alpha1.ContainerRecreateRequest) {
		r.Spec.ActiveDeadlineSeconds = ptr.To[int64](300)
	})
	for _, tc := range []struct{ patch, msg string }{
		{`{"spec":{"activeDeadlineSeconds":600}}`, "the spec of a ContainerRecreateRequest cannot be changed"},
		{`{"metadata":{"labels":{"crr.apps.kruise.io/node-name":"elsewhere"}}}`, "metadata.labels[crr.apps.kruise.io/node-name]: Forbidden"},
		{`{"metadata":{"labels":{"crr.apps.kruise.io/pod-uid":null}}}`, "metadata.labels[crr.apps.kruise.io/pod-uid]: Forbidden"},
	} {
		err := s.c.Client.Patch(ctx, crr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(tc.patch)))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("patch %s: want %q, got %v", tc.patch, tc.msg, err)
		}
	}
}
