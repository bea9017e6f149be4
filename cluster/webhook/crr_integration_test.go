// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
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
)

const (
	crrMutator   = `admission webhook "containerrecreaterequests.mutate.probeshim.io" denied the request`
	crrValidator = `admission webhook "containerrecreaterequests.probeshim.io" denied the request`
)

var crrSeq atomic.Int64

// crrPod is a pod as a kubelet on node-a would report it: "main" has an exec preStop, "web" an
// httpGet one on a named port, "log" none, "late" has not started.
func crrPod(t *testing.T, mut func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: fmt.Sprintf("crr-pod-%d", crrSeq.Add(1))},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{
			{Name: "main", Image: "busybox", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
				Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep 3"}}}}},
			{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromString("http")}}}},
			{Name: "log", Image: "busybox"},
			{Name: "late", Image: "busybox"},
		}},
	}
	if mut != nil {
		mut(pod)
	}
	status := pod.Status
	if err := testEnv.admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if status.Phase == "" {
		status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.7", PodIPs: []corev1.PodIP{{IP: "10.244.1.7"}}}
		for i, c := range pod.Spec.Containers {
			cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, RestartCount: int32(i)}
			if c.Name != "late" {
				cs.ContainerID = fmt.Sprintf("containerd://%s-%s", pod.Name, c.Name)
				cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
			} else {
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
			}
			status.ContainerStatuses = append(status.ContainerStatuses, cs)
		}
	}
	pod.Status = status
	if err := testEnv.admin.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func newCRR(pod string, containers ...string) *v1alpha1.ContainerRecreateRequest {
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: fmt.Sprintf("crr-%d", crrSeq.Add(1))},
		Spec:       v1alpha1.ContainerRecreateRequestSpec{PodName: pod},
	}
	for _, c := range containers {
		crr.Spec.Containers = append(crr.Spec.Containers, v1alpha1.ContainerRecreateRequestContainer{Name: c})
	}
	return crr
}

// The mutator's output on a real CREATE: labels, the defaulted failure policy, and each
// container's preStop, ports and status context from the pod.
func TestContainerRecreateRequestInjection(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	pod := crrPod(t, nil)
	crr := newCRR(pod.Name, "main", "web", "log")
	crr.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{OrderedRecreate: true}
	crr.Labels = map[string]string{"team": "games", v1alpha1.LabelCRRNodeName: "elsewhere"}
	if err := testEnv.admin.Create(ctx, crr); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.ContainerRecreateRequest{}
	if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(crr), got); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"team": "games", v1alpha1.LabelCRRPodUID: string(pod.UID),
		v1alpha1.LabelCRRNodeName: "node-a", v1alpha1.LabelCRRActive: "true"}
	if fmt.Sprint(got.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("labels %v, want %v", got.Labels, wantLabels)
	}
	if s := got.Spec.Strategy; s.FailurePolicy != v1alpha1.ContainerRecreateRequestFailurePolicyFail || !s.OrderedRecreate {
		t.Errorf("strategy %+v", s)
	}
	// The pod's grace (30 s, the API server's default), written into the request as OpenKruise does.
	if g := got.Spec.Strategy.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("strategy.terminationGracePeriodSeconds %v, want the pod's 30", g)
	}
	c := got.Spec.Containers
	if len(c) != 3 {
		t.Fatalf("containers %+v", c)
	}
	for i, name := range []string{"main", "web", "log"} {
		want := v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://" + pod.Name + "-" + name, RestartCount: int32([]int{0, 1, 2}[i])}
		if c[i].StatusContext == nil || *c[i].StatusContext != want {
			t.Errorf("%s: statusContext %+v, want %+v", name, c[i].StatusContext, want)
		}
	}
	if c[0].PreStop == nil || c[0].PreStop.Exec == nil || strings.Join(c[0].PreStop.Exec.Command, " ") != "sh -c sleep 3" || c[0].Ports != nil {
		t.Errorf("main: preStop %+v ports %+v", c[0].PreStop, c[0].Ports)
	}
	if c[1].PreStop == nil || c[1].PreStop.HTTPGet == nil || c[1].PreStop.HTTPGet.Port != intstr.FromString("http") ||
		len(c[1].Ports) != 1 || c[1].Ports[0].ContainerPort != 8080 {
		t.Errorf("web: preStop %+v ports %+v", c[1].PreStop, c[1].Ports)
	}
	if c[2].PreStop != nil || c[2].Ports != nil {
		t.Errorf("log: preStop %+v ports %+v", c[2].PreStop, c[2].Ports)
	}

	// An explicit policy is kept.
	ignore := newCRR(pod.Name, "log")
	ignore.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyIgnore}
	if err := testEnv.admin.Create(ctx, ignore); err != nil {
		t.Fatal(err)
	}
	if ignore.Spec.Strategy.FailurePolicy != v1alpha1.ContainerRecreateRequestFailurePolicyIgnore {
		t.Errorf("failurePolicy %s", ignore.Spec.Strategy.FailurePolicy)
	}
	// So is an explicit grace, zero included.
	short := newCRR(pod.Name, "log")
	short.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{TerminationGracePeriodSeconds: ptr.To[int64](0)}
	if err := testEnv.admin.Create(ctx, short); err != nil {
		t.Fatal(err)
	}
	if g := short.Spec.Strategy.TerminationGracePeriodSeconds; g == nil || *g != 0 {
		t.Errorf("explicit grace 0 became %v", g)
	}
}

// A pod annotated probeshim.io/crr-concurrency: Forbid gets one active request at a time; without
// the annotation a second active request is admitted, as in OpenKruise.
func TestContainerRecreateRequestConcurrencyForbid(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	forbid := crrPod(t, func(p *corev1.Pod) {
		p.Annotations = map[string]string{v1alpha1.AnnotationCRRConcurrency: v1alpha1.CRRConcurrencyForbid}
	})
	first := newCRR(forbid.Name, "log")
	if err := testEnv.admin.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	err := testEnv.admin.Create(ctx, newCRR(forbid.Name, "main"))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), crrMutator) ||
		!strings.Contains(err.Error(), "already has the active ContainerRecreateRequest "+first.Name) {
		t.Fatalf("second active request: %v", err)
	}
	// Once the first is no longer active (the lifecycle controller removes the label when it
	// completes), the next one is admitted.
	delete(first.Labels, v1alpha1.LabelCRRActive)
	if err := testEnv.admin.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := testEnv.admin.Create(ctx, newCRR(forbid.Name, "main")); err != nil {
		t.Errorf("after the first completed: %v", err)
	}

	allow := crrPod(t, nil)
	for range 2 {
		if err := testEnv.admin.Create(ctx, newCRR(allow.Name, "log")); err != nil {
			t.Errorf("a pod without the annotation: %v", err)
		}
	}
}

// Every rejection, through the real API server; each case is one change to a valid request.
func TestContainerRecreateRequestRejections(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	pod := crrPod(t, nil)
	unscheduled := crrPod(t, func(p *corev1.Pod) { p.Spec.NodeName = ""; p.Status = corev1.PodStatus{Phase: corev1.PodPending} })
	finished := crrPod(t, func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodSucceeded} })
	deleting := crrPod(t, func(p *corev1.Pod) { p.Finalizers = []string{"test.probeshim.io/hold"} })
	if err := testEnv.admin.Delete(ctx, deleting); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = testEnv.admin.Patch(ctx, deleting, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	hostHook := crrPod(t, func(p *corev1.Pod) {
		p.Spec.Containers[1].Lifecycle.PreStop.HTTPGet.Host = "169.254.169.254"
	})

	cases := []struct {
		name  string
		mut   func(*v1alpha1.ContainerRecreateRequest)
		field string
		msg   string
	}{
		{"pod missing", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = "nope" },
			"spec.podName", "pod nope does not exist in namespace games"},
		{"pod not scheduled", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = unscheduled.Name },
			"spec.podName", "is not running on a node yet"},
		{"pod finished", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = finished.Name },
			"spec.podName", "has finished (phase Succeeded)"},
		{"pod being deleted", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.PodName = deleting.Name },
			"spec.podName", "is being deleted"},
		{"unknown container", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].Name = "nginx" },
			"spec.containers[0].name", `supported values: "main", "web", "log", "late"`},
		{"container not started", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers[0].Name = "late" },
			"spec.containers[0].name", "has not started yet"},
		{"duplicate container", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers = append(c.Spec.Containers, c.Spec.Containers[0])
		}, "spec.containers[1].name", "Duplicate value"},
		{"no containers", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.Containers = nil },
			"spec.containers", "list at least one container"},
		{"activeDeadlineSeconds below 3", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.ActiveDeadlineSeconds = ptr.To[int64](2) },
			"spec.activeDeadlineSeconds", "must be at least 3 seconds"},
		{"negative ttlSecondsAfterFinished", func(c *v1alpha1.ContainerRecreateRequest) { c.Spec.TTLSecondsAfterFinished = ptr.To[int32](-1) },
			"spec.ttlSecondsAfterFinished", "must be greater than or equal to 0"},
		{"negative terminationGracePeriodSeconds", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{TerminationGracePeriodSeconds: ptr.To[int64](-1)}
		}, "spec.strategy.terminationGracePeriodSeconds", "must be greater than or equal to 0"},
		{"negative unreadyGracePeriodSeconds", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{UnreadyGracePeriodSeconds: ptr.To[int64](-5)}
		}, "spec.strategy.unreadyGracePeriodSeconds", "must be greater than or equal to 0"},
		{"negative minStartedSeconds", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{MinStartedSeconds: -1}
		}, "spec.strategy.minStartedSeconds", "must be greater than or equal to 0"},
		{"unknown failurePolicy", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: "Retry"}
		}, "spec.strategy.failurePolicy", `supported values: "Fail", "Ignore"`},
		{"user-supplied preStop", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].PreStop = &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"rm", "-rf", "/data"}}}
		}, "spec.containers[0].preStop", "copied from the pod by admission"},
		{"user-supplied statusContext", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].StatusContext = &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://x"}
		}, "spec.containers[0].statusContext", "copied from the pod by admission"},
		{"user-supplied ports", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 22}}
		}, "spec.containers[0].ports", "copied from the pod by admission"},
		{"user-supplied unready-acquired annotation", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Annotations = map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: time.Now().Add(-time.Hour).Format(time.RFC3339)}
		}, "metadata.annotations[crr.apps.kruise.io/unready-acquired]", "set by probeshim"},
		{"pod's preStop names another host", func(c *v1alpha1.ContainerRecreateRequest) {
			c.Spec.PodName, c.Spec.Containers[0].Name = hostHook.Name, "web"
		}, "spec.containers[0].preStop.httpGet.host", "the preStop hook of container web in the pod cannot be run by probeshim"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crr := newCRR(pod.Name, "main")
			tc.mut(crr)
			err := testEnv.admin.Create(ctx, crr)
			if err == nil {
				t.Fatalf("created %+v", crr.Spec)
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), crrMutator) {
				t.Errorf("not an Invalid from the mutating webhook: %v", err)
			}
			if !strings.Contains(err.Error(), tc.msg) || !hasCause(err, tc.field) {
				t.Errorf("want %q on %s, got %v", tc.msg, tc.field, err)
			}
		})
	}

	// All reasons at once, so a user fixes them in one go.
	crr := newCRR(pod.Name, "nginx", "late")
	crr.Spec.ActiveDeadlineSeconds = ptr.To[int64](1)
	err := testEnv.admin.Create(ctx, crr)
	for _, f := range []string{"spec.containers[0].name", "spec.containers[1].name", "spec.activeDeadlineSeconds"} {
		if !hasCause(err, f) {
			t.Errorf("no cause on %s: %v", f, err)
		}
	}

	if err := testEnv.admin.Create(ctx, newCRR(pod.Name, "main")); err != nil {
		t.Fatalf("the valid base was rejected: %v", err)
	}
}

// After creation: the spec and the injected labels never change, the active label can only go,
// the unready-acquired annotation is written once; status writes never reach the webhook.
func TestContainerRecreateRequestUpdates(t *testing.T) {
	policyReady(t)
	ctx := context.Background()
	pod := crrPod(t, nil)
	crr := newCRR(pod.Name, "main")
	if err := testEnv.admin.Create(ctx, crr); err != nil {
		t.Fatal(err)
	}
	patch := func(body string) error {
		return testEnv.admin.Patch(ctx, crr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(body)))
	}
	rejected := func(name, body, field, msg string) {
		t.Helper()
		err := patch(body)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), crrValidator) || !hasCause(err, field) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: want %q on %s from the validating webhook, got %v", name, msg, field, err)
		}
	}
	rejected("spec change", `{"spec":{"activeDeadlineSeconds":60}}`, "spec", "cannot be changed")
	rejected("container change", `{"spec":{"containers":[{"name":"web"}]}}`, "spec", "cannot be changed")
	rejected("pod-uid label", `{"metadata":{"labels":{"crr.apps.kruise.io/pod-uid":"other"}}}`,
		"metadata.labels[crr.apps.kruise.io/pod-uid]", "immutable")
	rejected("node-name label removed", `{"metadata":{"labels":{"crr.apps.kruise.io/node-name":null}}}`,
		"metadata.labels[crr.apps.kruise.io/node-name]", "immutable")
	rejected("active label value", `{"metadata":{"labels":{"crr.apps.kruise.io/active":"false"}}}`,
		"metadata.labels[crr.apps.kruise.io/active]", `must stay "true"`)

	// Other metadata is free; the lifecycle controller's writes pass.
	if err := patch(`{"metadata":{"labels":{"team":"games"},"annotations":{"note":"x"}}}`); err != nil {
		t.Errorf("other metadata: %v", err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	if err := patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationCRRUnreadyAcquired, now)); err != nil {
		t.Errorf("setting unready-acquired: %v", err)
	}
	rejected("unready-acquired change", fmt.Sprintf(`{"metadata":{"annotations":{%q:"2000-01-01T00:00:00Z"}}}`, v1alpha1.AnnotationCRRUnreadyAcquired),
		"metadata.annotations[crr.apps.kruise.io/unready-acquired]", "immutable once set")
	if err := patch(`{"metadata":{"labels":{"crr.apps.kruise.io/active":null}}}`); err != nil {
		t.Errorf("removing the active label: %v", err)
	}
	rejected("active label set again", `{"metadata":{"labels":{"crr.apps.kruise.io/active":"true"}}}`,
		"metadata.labels[crr.apps.kruise.io/active]", "never set again")

	before := testEnv.calls.get(PathContainerRecreateRequestValidate)
	st := crr.DeepCopy()
	st.Status = v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating}
	if err := clusterClient(t).Status().Patch(ctx, st, client.MergeFrom(crr)); err != nil {
		t.Fatal(err)
	}
	if n := testEnv.calls.get(PathContainerRecreateRequestValidate) - before; n != 0 {
		t.Errorf("a status write went to the validating webhook %d times", n)
	}
}

// A pod whose preStop hook is larger than a request may carry can still be recreated: the request
// gets no copy (and a warning), and the node runs the pod's own hook. Before, such a pod could get
// no request at all, so the liveness decider could never restart it.
func TestContainerRecreateRequestLargePreStop(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	script := "echo draining; " + strings.Repeat("sleep 0; ", 600) // about 5.4 KiB, over the 4 KiB a copy may have
	pod := crrPod(t, func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle.PreStop.Exec.Command = []string{"sh", "-c", script}
	})
	crr := newCRR(pod.Name, "main")
	c := testEnv.admin
	if err := c.Create(ctx, crr); err != nil {
		t.Fatalf("a request for a pod with a %d-byte preStop: %v", len(script), err)
	}
	got := &v1alpha1.ContainerRecreateRequest{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(crr), got); err != nil {
		t.Fatal(err)
	}
	if pre := got.Spec.Containers[0].PreStop; pre != nil {
		t.Errorf("the request carries a %d-byte copy of the hook", len(fmt.Sprint(pre)))
	}
	if got.Spec.Containers[0].StatusContext == nil {
		t.Error("no status context: the request cannot be carried out")
	}
}
