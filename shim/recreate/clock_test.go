// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/clocktest"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/kube"
	"github.com/probeshim/probeshim/shim/kube/kubetest"
	shimruntime "github.com/probeshim/probeshim/shim/runtime"
)

// The executor's clock-driven paths, one step at a time: a fake clock owns every wait, a fake
// API server holds the one request (with resource versions, so a stale write conflicts), the
// informers are left out (the test puts the pod and the request in their indexes) and the test
// calls the pod worker's step itself.

var ct0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// crrAPI serves GET and status PATCH of one ContainerRecreateRequest.
type crrAPI struct {
	t       *testing.T
	mu      sync.Mutex
	crr     *v1alpha1.ContainerRecreateRequest
	rv      int
	patches []string
	// fail answers the next status patch whose body contains the key with the code.
	fail map[string]int
}

func (a *crrAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	status := func(code int, reason string) {
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":%q,"code":%d}`, reason, code)
	}
	switch {
	case r.Method == http.MethodGet:
	case r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/status"):
		b, _ := io.ReadAll(r.Body)
		for key, code := range a.fail {
			if strings.Contains(string(b), key) {
				delete(a.fail, key)
				a.patches = append(a.patches, fmt.Sprintf("%d %s", code, b))
				status(code, map[int]string{http.StatusConflict: "Conflict", http.StatusInternalServerError: "InternalError"}[code])
				return
			}
		}
		var p struct {
			Metadata struct{ ResourceVersion string } `json:"metadata"`
			Status   v1alpha1.ContainerRecreateRequestStatus
		}
		if err := json.Unmarshal(b, &p); err != nil {
			a.t.Errorf("patch %s: %v", b, err)
		}
		if p.Metadata.ResourceVersion != a.crr.ResourceVersion {
			a.patches = append(a.patches, fmt.Sprintf("409 %s", b))
			status(http.StatusConflict, "Conflict")
			return
		}
		a.patches = append(a.patches, fmt.Sprintf("200 %s", b))
		a.rv++
		a.crr.ResourceVersion = fmt.Sprint(a.rv)
		a.crr.Status = p.Status // the executor writes every field of the status it cares about
	default:
		status(http.StatusMethodNotAllowed, "MethodNotAllowed")
		return
	}
	_ = json.NewEncoder(w).Encode(a.crr)
}

func (a *crrAPI) current() *v1alpha1.ContainerRecreateRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.crr.DeepCopy()
}

// clockNode is the runtime of one pod with containers a (preStop "drain") and b, as a1 and b1.
type clockNode struct {
	clock *clocktest.Clock
	mu    sync.Mutex
	// execTakes is how long the preStop hook runs, on the fake clock.
	execTakes time.Duration
	execs     []string
	// stopErrs are the answers of the next stops (nil once used up).
	stopErrs []error
	stops    chan string // "id grace"
	missing  bool        // the runtime knows no container
}

func (n *clockNode) Container(_, name string) (prober.ContainerStatus, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.missing {
		return prober.ContainerStatus{}, false
	}
	return prober.ContainerStatus{ID: name + "1", Running: true, StartedAt: ct0.Add(-time.Hour)}, true
}

func (n *clockNode) Exec(_ context.Context, id string, cmd []string, timeout time.Duration) (prober.ExecResult, error) {
	n.mu.Lock()
	n.execs = append(n.execs, fmt.Sprintf("%s %s timeout=%v", id, strings.Join(cmd, " "), timeout))
	d := n.execTakes
	n.mu.Unlock()
	n.clock.Step(d)
	return prober.ExecResult{}, nil
}

func (n *clockNode) StopContainer(_ context.Context, id string, grace time.Duration) error {
	n.mu.Lock()
	var err error
	if len(n.stopErrs) > 0 {
		err, n.stopErrs = n.stopErrs[0], n.stopErrs[1:]
	}
	n.mu.Unlock()
	n.stops <- fmt.Sprintf("%s %v", id, grace)
	return err
}

type clockHarness struct {
	t     *testing.T
	e     *Executor
	w     *podWorker
	api   *crrAPI
	node  *clockNode
	clock *clocktest.Clock
	ctx   context.Context
}

// newClockHarness makes the pod web (containers a and b running as a1 and b1; a has an exec
// preStop) and a request for the containers named, changed by mut.
func newClockHarness(t *testing.T, containers []string, mut func(*v1alpha1.ContainerRecreateRequest)) *clockHarness {
	t.Helper()
	const uid = "uid-web"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: uid},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{
			{Name: "a", Image: "busybox", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}},
			{Name: "b", Image: "busybox"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9"},
	}
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "req", UID: types.UID("uid-req"), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(ct0.Add(-time.Minute)),
			Labels:            map[string]string{v1alpha1.LabelCRRPodUID: uid, v1alpha1.LabelCRRNodeName: "node-a", v1alpha1.LabelCRRActive: "true"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: "web",
			Strategy: &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail}},
	}
	for _, c := range containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c, Image: "busybox",
			ContainerID: "containerd://" + c + "1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(ct0.Add(-time.Hour))}}})
		rc := v1alpha1.ContainerRecreateRequestContainer{Name: c,
			StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://" + c + "1"}}
		if c == "a" {
			rc.PreStop = &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}
		}
		crr.Spec.Containers = append(crr.Spec.Containers, rc)
	}
	if mut != nil {
		mut(crr)
	}
	api := &crrAPI{t: t, crr: crr.DeepCopy(), rv: 1, fail: map[string]int{}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cl, err := kube.NewForConfig(&rest.Config{Host: srv.URL}, kube.Options{QPS: 1000, Burst: 1000}) // no client-side throttle: it waits on the real clock
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktest.New(ct0)
	node := &clockNode{clock: clock, stops: make(chan string, 10)}
	log := logrus.New()
	log.SetOutput(io.Discard)
	if testing.Verbose() {
		log.SetOutput(testWriter{t})
	}
	e := New(Config{Node: "node-a", Client: cl.Kruise, Kube: kubetest.Adapt(kubefake.NewClientset()), Runtime: node, Containers: node,
		Log: log, Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	e.ctx = ctx
	t.Cleanup(func() { cancel(); e.ops.Wait() })
	if err := e.pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	if err := e.crrs.Add(crr); err != nil {
		t.Fatal(err)
	}
	h := &clockHarness{t: t, e: e, w: newPodWorker(e, uid), api: api, node: node, clock: clock, ctx: ctx}
	// The first step takes the request up: Recreating, each container Pending.
	if next, _ := h.w.step(ctx); next != 0 || h.api.current().Status.Phase != v1alpha1.ContainerRecreateRequestRecreating {
		t.Fatalf("first step: next %v, phase %q; want 0 and Recreating", next, h.api.current().Status.Phase)
	}
	return h
}

// stop returns the next container stop ("id grace").
func (h *clockHarness) stop() string {
	h.t.Helper()
	select {
	case s := <-h.node.stops:
		return s
	case <-time.After(5 * time.Second):
		h.t.Fatal("no container stopped")
		return ""
	}
}

// noStop checks that nothing was stopped so far.
func (h *clockHarness) noStop() {
	h.t.Helper()
	select {
	case s := <-h.node.stops:
		h.t.Fatalf("stopped %s", s)
	default:
	}
}

// message is the status message of the request's container.
func (h *clockHarness) message(container string) string {
	if s := stateOf(h.api.current(), container); s != nil {
		return s.Message
	}
	return ""
}

// The grace period covers the preStop hook and the stop together: the hook gets all of it as its
// timeout, the stop what the hook left, but never less than 2 s.
func TestExecutorGraceAfterPreStop(t *testing.T) {
	for _, tc := range []struct {
		hook time.Duration
		stop string
	}{
		{25 * time.Second, "a1 5s"},
		{29500 * time.Millisecond, "a1 2s"}, // minGrace
		{0, "a1 30s"},
	} {
		t.Run(tc.hook.String(), func(t *testing.T) {
			h := newClockHarness(t, []string{"a"}, nil)
			h.node.execTakes = tc.hook
			h.w.step(h.ctx)
			if got := h.stop(); got != tc.stop {
				t.Errorf("stop %q, want %q", got, tc.stop)
			}
			h.e.ops.Wait()
			if want := []string{"a1 drain timeout=30s"}; fmt.Sprint(h.node.execs) != fmt.Sprint(want) {
				t.Errorf("execs %v, want %v (the pod's 30 s default grace as the hook's timeout)", h.node.execs, want)
			}
			grace := strings.TrimPrefix(tc.stop, "a1 ")
			if want := "stopping container a1 (grace period " + grace + ")"; h.message("a") != want {
				t.Errorf("message %q, want %q", h.message("a"), want)
			}
		})
	}
}

// unreadyGracePeriodSeconds: nothing is stopped before the cluster stamps the request, then the
// worker comes back exactly when the grace ends, and stops then.
func TestExecutorUnreadyGraceOnTheClock(t *testing.T) {
	h := newClockHarness(t, []string{"b"}, func(r *v1alpha1.ContainerRecreateRequest) {
		r.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](10)
	})
	if next, _ := h.w.step(h.ctx); next != poll {
		t.Errorf("without the cluster's stamp: next look in %v, want the poll (%v)", next, poll)
	}
	if m := h.api.current().Status.Message; !strings.Contains(m, "waiting for the cluster to make the pod not ready") {
		t.Errorf("message %q", m)
	}
	// The cluster made the pod not ready 3 s ago.
	stamped := h.api.current()
	stamped.Annotations = map[string]string{v1alpha1.AnnotationCRRUnreadyAcquired: ct0.Add(-3 * time.Second).Format(time.RFC3339)}
	h.api.mu.Lock()
	h.api.crr.Annotations = stamped.Annotations
	h.api.mu.Unlock()
	if next, _ := h.w.step(h.ctx); next != 7*time.Second {
		t.Errorf("stamped 3 s ago with 10 s of grace: next look in %v, want 7s", next)
	}
	if m := h.api.current().Status.Message; !strings.Contains(m, "after the unready grace period (10s)") {
		t.Errorf("message %q", m)
	}
	h.clock.Step(6999 * time.Millisecond)
	if next, _ := h.w.step(h.ctx); next != time.Millisecond {
		t.Errorf("1 ms before the end: next look in %v, want 1ms", next)
	}
	h.noStop()
	h.clock.Step(time.Millisecond)
	h.w.step(h.ctx)
	if got := h.stop(); got != "b1 30s" {
		t.Errorf("stop %q", got)
	}
}

// A runtime that cannot be reached is asked again after 1 s, then 2 s; the stop is the same
// instance with the same grace each time, and the request is not given up on.
func TestExecutorStopRetriesOnTheClock(t *testing.T) {
	h := newClockHarness(t, []string{"b"}, nil)
	unavailable := fmt.Errorf("dial containerd: %w", shimruntime.ErrUnavailable)
	h.node.stopErrs = []error{unavailable, unavailable}
	h.w.step(h.ctx)
	if got := h.stop(); got != "b1 30s" {
		t.Errorf("stop %q", got)
	}
	if d := h.clock.Wait(t); d != time.Second {
		t.Fatalf("first retry after %v, want 1s", d)
	}
	h.clock.Step(999 * time.Millisecond)
	h.noStop()
	h.clock.Step(time.Millisecond)
	if got := h.stop(); got != "b1 30s" {
		t.Errorf("second stop %q", got)
	}
	if d := h.clock.Wait(t); d != 2*time.Second {
		t.Fatalf("second retry after %v, want 2s", d)
	}
	h.clock.Step(2 * time.Second)
	if got := h.stop(); got != "b1 30s" {
		t.Errorf("third stop %q", got)
	}
	h.e.ops.Wait()
	h.clock.NoWait(t)
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if m := h.w.runs["uid-req"].containers["b"]; m.stopErr != "" {
		t.Errorf("stop error %q recorded after the third stop succeeded", m.stopErr)
	}
}

// Recording the kill: a conflict is read again and retried at once; any other error waits 200 ms
// (then 400 ms, ...) on the clock. The container is stopped only once the record is written.
func TestExecutorKillRecordRetriesOnTheClock(t *testing.T) {
	h := newClockHarness(t, []string{"b"}, nil)
	h.api.mu.Lock()
	h.api.fail[`"isKilled":true`] = http.StatusConflict
	h.api.mu.Unlock()
	h.w.step(h.ctx)
	if got := h.stop(); got != "b1 30s" {
		t.Errorf("stop %q", got)
	}
	h.e.ops.Wait()
	h.clock.NoWait(t) // the conflict was not waited on

	h = newClockHarness(t, []string{"b"}, nil)
	h.api.mu.Lock()
	h.api.fail[`"isKilled":true`] = http.StatusInternalServerError
	h.api.mu.Unlock()
	h.w.step(h.ctx)
	if d := h.clock.Wait(t); d != 200*time.Millisecond {
		t.Fatalf("retry after %v, want 200ms", d)
	}
	h.noStop()
	if s := stateOf(h.api.current(), "b"); s.IsKilled {
		t.Fatal("isKilled recorded by a write that failed")
	}
	h.clock.Step(200 * time.Millisecond)
	if got := h.stop(); got != "b1 30s" {
		t.Errorf("stop %q", got)
	}
	if s := stateOf(h.api.current(), "b"); !s.IsKilled {
		t.Error("stopped without isKilled recorded")
	}
}

// A container neither the runtime nor the pod status knows is waited for, notFoundTimeout (1 min)
// on the clock, and the worker comes back when that ends; then it is Failed and nothing stopped.
func TestExecutorContainerNotFoundOnTheClock(t *testing.T) {
	h := newClockHarness(t, []string{"b"}, nil)
	h.node.mu.Lock()
	h.node.missing = true
	h.node.mu.Unlock()
	pod := h.e.pod("uid-web").DeepCopy()
	pod.Status.ContainerStatuses = nil
	if err := h.e.pods.Update(pod); err != nil {
		t.Fatal(err)
	}
	if next, _ := h.w.step(h.ctx); next != time.Minute {
		t.Errorf("next look in %v, want the not-found timeout (1m)", next)
	}
	if m := h.message("b"); m != "container not found on the node" {
		t.Errorf("message %q", m)
	}
	h.clock.Step(59 * time.Second)
	if next, _ := h.w.step(h.ctx); next != time.Second {
		t.Errorf("next look in %v, want 1s", next)
	}
	h.clock.Step(time.Second)
	h.w.step(h.ctx)
	got := h.api.current()
	if s := stateOf(got, "b"); got.Status.Phase != v1alpha1.ContainerRecreateRequestCompleted ||
		s.Phase != v1alpha1.ContainerRecreateRequestFailed || s.Message != "container not found on the node for 1m0s" {
		t.Errorf("after the timeout: %s, b %+v", got.Status.Phase, s)
	}
	h.noStop()
}
