// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package recreate

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	testpoll "github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/kube"
	shimruntime "github.com/probeshim/probeshim/shim/runtime"
)

// The Executor against a real API server; a fake runtime plays containerd and the kubelet: a
// stopped container comes back under a new ID after restartDelay, and the pod status says so.

var envOnce struct {
	sync.Once
	cfg  *rest.Config
	c    client.Client
	stop func()
	skip string
}

func apiServer(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	envOnce.Do(func() {
		dir, err := kubebin.Dir()
		if err != nil {
			envOnce.skip = err.Error()
			return
		}
		env := kubebin.Environment(dir, kubebin.CRDs())
		if _, err := env.Start(); err != nil {
			envOnce.skip = err.Error()
			return
		}
		envOnce.cfg = env.Config
		envOnce.stop = func() { _ = env.Stop() }
		scheme := runtime.NewScheme()
		_ = clientgoscheme.AddToScheme(scheme)
		_ = v1alpha1.AddToScheme(scheme)
		envOnce.c, err = client.New(env.Config, client.Options{Scheme: scheme})
		if err != nil {
			envOnce.skip = err.Error()
		}
	})
	if envOnce.cfg == nil || envOnce.c == nil {
		t.Skip("envtest: " + envOnce.skip)
	}
	return envOnce.cfg, envOnce.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if envOnce.stop != nil {
		envOnce.stop()
	}
	os.Exit(code)
}

// fakeNode is containerd, the tracker and the kubelet of one pod.
type fakeNode struct {
	t            *testing.T
	admin        client.Client
	pod          *corev1.Pod
	restartDelay time.Duration
	execFn       func(ctx context.Context, cmd []string, timeout time.Duration) (prober.ExecResult, error)

	mu    sync.Mutex
	ctrs  map[string]*prober.ContainerStatus // by name
	gen   map[string]int
	stops []string // "name:id"
	execs []string
	times map[string]time.Time // first stop of each container
}

func (n *fakeNode) Container(podUID, name string) (prober.ContainerStatus, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if podUID != string(n.pod.UID) || n.ctrs[name] == nil {
		return prober.ContainerStatus{}, false
	}
	return *n.ctrs[name], true
}

func (n *fakeNode) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (prober.ExecResult, error) {
	n.mu.Lock()
	n.execs = append(n.execs, id+":"+strings.Join(cmd, " "))
	fn := n.execFn
	n.mu.Unlock()
	if fn != nil {
		return fn(ctx, cmd, timeout)
	}
	return prober.ExecResult{}, nil
}

func (n *fakeNode) StopContainer(_ context.Context, id string, grace time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, c := range n.ctrs {
		if c.ID != id {
			continue
		}
		n.stops = append(n.stops, name+":"+id)
		if _, ok := n.times[name]; !ok {
			n.times[name] = time.Now()
		}
		if !c.Running {
			return nil
		}
		c.Running = false
		n.gen[name]++
		next := fmt.Sprintf("%s%d", name, n.gen[name]+1)
		time.AfterFunc(n.restartDelay, func() { n.start(name, next) })
		return nil
	}
	return fmt.Errorf("container %s: %w", id, shimruntime.ErrNotFound)
}

// start runs a new instance and reports it in the pod status, as the kubelet does after the
// container's postStart hook.
func (n *fakeNode) start(name, id string) {
	now := time.Now()
	n.mu.Lock()
	n.ctrs[name] = &prober.ContainerStatus{ID: id, Running: true, StartedAt: now}
	n.mu.Unlock()
	n.report(name, id, now)
}

func (n *fakeNode) report(name, id string, started time.Time) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := n.admin.Get(context.Background(), client.ObjectKeyFromObject(n.pod), pod); err != nil {
			return err
		}
		found := false
		for i := range pod.Status.ContainerStatuses {
			cs := &pod.Status.ContainerStatuses[i]
			if cs.Name == name {
				found = true
				if cs.ContainerID != "containerd://"+id {
					cs.RestartCount++
				}
				cs.ContainerID = "containerd://" + id
				cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
			}
		}
		if !found {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: "busybox",
				ContainerID: "containerd://" + id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}})
		}
		pod.Status.Phase = corev1.PodRunning
		return n.admin.Status().Update(context.Background(), pod)
	})
	if err != nil {
		n.t.Errorf("reporting %s: %v", id, err)
	}
}

func (n *fakeNode) stopped() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.stops)
}

var seq atomic.Int64

// setup makes a namespace, a pod on node-a with containers a and b (a has an exec preStop)
// running as a1 and b1, and the fake node.
func setup(t *testing.T, mutPod func(*corev1.Pod)) (*fakeNode, client.Client) {
	t.Helper()
	_, c := apiServer(t)
	ctx := context.Background()
	ns := fmt.Sprintf("crr-%d", seq.Add(1))
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{
			{Name: "a", Image: "busybox", Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}},
			{Name: "b", Image: "busybox"}}},
	}
	if mutPod != nil {
		mutPod(pod)
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	n := &fakeNode{t: t, admin: c, pod: pod, restartDelay: 300 * time.Millisecond,
		ctrs: map[string]*prober.ContainerStatus{}, gen: map[string]int{}, times: map[string]time.Time{}}
	for _, ct := range pod.Spec.Containers {
		n.start(ct.Name, ct.Name+"1")
	}
	return n, c
}

// request creates a request as admission would have completed it.
func request(t *testing.T, c client.Client, n *fakeNode, name string, mut func(*v1alpha1.ContainerRecreateRequest)) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: n.pod.Namespace, Name: name, Labels: map[string]string{
			v1alpha1.LabelCRRPodUID: string(n.pod.UID), v1alpha1.LabelCRRNodeName: "node-a", v1alpha1.LabelCRRActive: "true"}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: n.pod.Name,
			Strategy: &v1alpha1.ContainerRecreateRequestStrategy{FailurePolicy: v1alpha1.ContainerRecreateRequestFailurePolicyFail},
			Containers: []v1alpha1.ContainerRecreateRequestContainer{
				{Name: "a", PreStop: &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}},
					StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://a1"}},
				{Name: "b", StatusContext: &v1alpha1.ContainerRecreateRequestContainerContext{ContainerID: "containerd://b1"}}}},
	}
	if mut != nil {
		mut(crr)
	}
	if err := c.Create(context.Background(), crr); err != nil {
		t.Fatal(err)
	}
	return crr
}

type running struct {
	e      *Executor
	cancel context.CancelFunc
	done   chan error
	events *record.FakeRecorder
}

func startExecutor(t *testing.T, n *fakeNode) *running {
	t.Helper()
	cfg, _ := apiServer(t)
	cl, err := kube.NewForConfig(cfg, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	if testing.Verbose() {
		log.SetOutput(testWriter{t})
	}
	events := record.NewFakeRecorder(100)
	e := New(Config{Node: "node-a", Client: cl.Kruise, Kube: cl.Kube, Runtime: n, Containers: n, Events: events, Log: log})
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{e: e, cancel: cancel, done: make(chan error, 1), events: events}
	// The tracker calls ContainerChanged from its own goroutine, before Run too.
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			e.ContainerChanged(string(n.pod.UID), "a")
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	go func() { r.done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done }) //nolint:errcheck // Run ends with the context's error
	testpoll.Eventually(t, 10*time.Second, func() error {
		if !e.Synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func summary(crr *v1alpha1.ContainerRecreateRequest) string {
	var cs []string
	for _, s := range crr.Status.ContainerRecreateStates {
		c := s.Name + "=" + string(s.Phase)
		if s.IsKilled {
			c += "(killed)"
		}
		cs = append(cs, c)
	}
	return fmt.Sprintf("%s done=%t %s", crr.Status.Phase, crr.Status.CompletionTime != nil, strings.Join(cs, " "))
}

func waitSummary(t *testing.T, c client.Client, crr *v1alpha1.ContainerRecreateRequest, want string, timeout time.Duration) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	cur := &v1alpha1.ContainerRecreateRequest{}
	testpoll.Eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(crr), cur); err != nil {
			return err
		}
		if got := summary(cur); got != want {
			return fmt.Errorf("got %q, want %q (message %q)", got, want, cur.Status.Message)
		}
		return nil
	})
	return cur
}

// holdSummary checks for d that the request's summary stays want and nothing is stopped.
func holdSummary(t *testing.T, c client.Client, n *fakeNode, crr *v1alpha1.ContainerRecreateRequest, want string, d time.Duration) {
	t.Helper()
	testpoll.Consistently(t, d, func() error {
		cur := &v1alpha1.ContainerRecreateRequest{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(crr), cur); err != nil {
			return err
		}
		if got := summary(cur); got != want {
			return fmt.Errorf("summary %q, want %q (message %q)", got, want, cur.Status.Message)
		}
		return noStops(n)()
	})
}

// noStops fails when a container was stopped or an exec run.
func noStops(n *fakeNode) func() error {
	return func() error {
		n.mu.Lock()
		defer n.mu.Unlock()
		if len(n.stops) != 0 || len(n.execs) != 0 {
			return fmt.Errorf("stops %v, execs %v; want none", n.stops, n.execs)
		}
		return nil
	}
}

func TestExecutorRecreates(t *testing.T) {
	n, c := setup(t, nil)
	r := startExecutor(t, n)
	crr := request(t, c, n, "both", nil)
	got := waitSummary(t, c, crr, "Completed done=true a=Succeeded(killed) b=Succeeded(killed)", 10*time.Second)
	if got.Status.Message != "recreated a, b" {
		t.Errorf("message %q", got.Status.Message)
	}
	if s := n.stopped(); fmt.Sprint(s) != "[a:a1 b:b1]" && fmt.Sprint(s) != "[b:b1 a:a1]" {
		t.Errorf("stops %v", s)
	}
	if fmt.Sprint(n.execs) != "[a1:drain]" {
		t.Errorf("execs %v", n.execs)
	}
	var evs []string
	for len(r.events.Events) > 0 {
		evs = append(evs, <-r.events.Events)
	}
	slices.Sort(evs)
	want := "[Normal Killing Stopping container a for ContainerRecreateRequest both Normal Killing Stopping container b for ContainerRecreateRequest both]"
	if fmt.Sprint(evs) != want {
		t.Errorf("events %v", evs)
	}
}

// A request that says why (the liveness decider's) is told in the kubelet's words in the Killing
// event, with the decider's protections that let it go.
func TestExecutorKillingSaysWhy(t *testing.T) {
	n, c := setup(t, nil)
	r := startExecutor(t, n)
	crr := request(t, c, n, "liveness", func(crr *v1alpha1.ContainerRecreateRequest) {
		crr.Annotations = map[string]string{v1alpha1.AnnotationCRRReason: "failed liveness probe, will be restarted; decider: budget ok: PodDisruptionBudget shop/web allows 1 more"}
		crr.Spec.Containers = crr.Spec.Containers[1:]
	})
	waitSummary(t, c, crr, "Completed done=true b=Succeeded(killed)", 10*time.Second)
	if ev := <-r.events.Events; ev != "Normal Killing Container b failed liveness probe, will be restarted; decider: budget ok: PodDisruptionBudget shop/web allows 1 more (ContainerRecreateRequest liveness)" {
		t.Errorf("event %q", ev)
	}
}

// orderedRecreate: the second container is stopped only once the first is reported running
// again (here 1 s after its stop, as a postStart hook would delay it).
func TestExecutorOrdered(t *testing.T) {
	n, c := setup(t, nil)
	n.restartDelay = time.Second
	startExecutor(t, n)
	crr := request(t, c, n, "ordered", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.Strategy.OrderedRecreate = true })
	waitSummary(t, c, crr, "Completed done=true a=Succeeded(killed) b=Succeeded(killed)", 10*time.Second)
	if gap := n.times["b"].Sub(n.times["a"]); gap < time.Second {
		t.Errorf("b stopped %v after a", gap)
	}
}

// Two requests for one pod: one after the other, both complete, nothing stopped twice.
func TestExecutorQueuesRequestsOfAPod(t *testing.T) {
	n, c := setup(t, nil)
	n.restartDelay = time.Second
	startExecutor(t, n)
	first := request(t, c, n, "first", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.Containers = r.Spec.Containers[:1] })
	second := request(t, c, n, "second", func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.Containers = r.Spec.Containers[1:] })
	waitSummary(t, c, second, "Pending done=false ", 5*time.Second)
	waitSummary(t, c, first, "Completed done=true a=Succeeded(killed)", 10*time.Second)
	waitSummary(t, c, second, "Completed done=true b=Succeeded(killed)", 10*time.Second)
	if s := n.stopped(); fmt.Sprint(s) != "[a:a1 b:b1]" {
		t.Errorf("stops %v", s)
	}
}

// A request completed by the cluster (activeDeadlineSeconds) during the preStop hook: the hook
// is cancelled and nothing is stopped, then or later.
func TestExecutorNoKillAfterCompletion(t *testing.T) {
	n, c := setup(t, nil)
	hook := make(chan struct{})
	n.execFn = func(ctx context.Context, _ []string, _ time.Duration) (prober.ExecResult, error) {
		close(hook)
		<-ctx.Done()
		return prober.ExecResult{}, ctx.Err()
	}
	startExecutor(t, n)
	crr := request(t, c, n, "deadline", func(r *v1alpha1.ContainerRecreateRequest) {
		r.Spec.Strategy.OrderedRecreate = true
	})
	select {
	case <-hook:
	case <-time.After(10 * time.Second):
		t.Fatal("preStop hook not run")
	}
	// The cluster completes it, as at activeDeadlineSeconds.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1alpha1.ContainerRecreateRequest{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(crr), cur); err != nil {
			return err
		}
		cur.Status.Phase, cur.Status.CompletionTime, cur.Status.Message = v1alpha1.ContainerRecreateRequestCompleted, ptr.To(metav1.Now()), "recreating has exceeded the activeDeadlineSeconds (3s)"
		for i := range cur.Status.ContainerRecreateStates {
			cur.Status.ContainerRecreateStates[i].Phase = v1alpha1.ContainerRecreateRequestFailed
		}
		return c.Status().Update(context.Background(), cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Consistently(t, 2*time.Second, func() error {
		if s := n.stopped(); len(s) != 0 {
			return fmt.Errorf("stopped %v after the request completed", s)
		}
		return nil
	})
	waitSummary(t, c, crr, "Completed done=true a=Failed b=Failed", time.Second)
}

// The service dies after recording a's kill, before (or while) stopping it, and after b was
// stopped; the next run finishes a's stop of the same instance and follows b: each container
// is stopped exactly once for the request.
func TestExecutorResumesAfterRestart(t *testing.T) {
	n, c := setup(t, nil)
	crr := request(t, c, n, "resume", nil)
	n.mu.Lock()
	n.ctrs["b"].Running = false // b's stop went through: it is down, the kubelet restarts it
	n.mu.Unlock()
	time.AfterFunc(500*time.Millisecond, func() { n.start("b", "b2") })
	cur := &v1alpha1.ContainerRecreateRequest{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(crr), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status = v1alpha1.ContainerRecreateRequestStatus{Phase: v1alpha1.ContainerRecreateRequestRecreating,
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{
			{Name: "a", Phase: v1alpha1.ContainerRecreateRequestRecreating, IsKilled: true},
			{Name: "b", Phase: v1alpha1.ContainerRecreateRequestRecreating, IsKilled: true}}}
	if err := c.Status().Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	startExecutor(t, n)
	waitSummary(t, c, crr, "Completed done=true a=Succeeded(killed) b=Succeeded(killed)", 10*time.Second)
	if s := n.stopped(); fmt.Sprint(s) != "[a:a1]" {
		t.Errorf("stops %v, want only the interrupted stop of a1", s)
	}
	if len(n.execs) != 0 {
		t.Errorf("preStop ran again: %v", n.execs)
	}
}

// unreadyGracePeriodSeconds: nothing happens before the cluster stamps the request, then not
// before the grace has passed.
func TestExecutorUnreadyGrace(t *testing.T) {
	n, c := setup(t, nil)
	startExecutor(t, n)
	crr := request(t, c, n, "unready", func(r *v1alpha1.ContainerRecreateRequest) {
		r.Spec.Strategy.UnreadyGracePeriodSeconds = ptr.To[int64](2)
		r.Spec.Containers = r.Spec.Containers[1:]
	})
	waitSummary(t, c, crr, "Recreating done=false b=Pending", 5*time.Second)
	testpoll.Consistently(t, time.Second, func() error {
		if s := n.stopped(); len(s) != 0 {
			return fmt.Errorf("stopped %v before the pod was made not ready", s)
		}
		return nil
	})
	at := time.Now()
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationCRRUnreadyAcquired, at.UTC().Format(time.RFC3339Nano))
	if err := c.Patch(context.Background(), crr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatal(err)
	}
	waitSummary(t, c, crr, "Completed done=true b=Succeeded(killed)", 10*time.Second)
	if d := n.times["b"].Sub(at); d < 2*time.Second {
		t.Errorf("stopped %v after the pod was made not ready", d)
	}
}

// Requests of other nodes are not this node's business.
func TestExecutorOnlyOwnNode(t *testing.T) {
	n, c := setup(t, nil)
	startExecutor(t, n)
	crr := request(t, c, n, "elsewhere", func(r *v1alpha1.ContainerRecreateRequest) { r.Labels[v1alpha1.LabelCRRNodeName] = "node-b" })
	holdSummary(t, c, n, crr, " done=false ", 1500*time.Millisecond)
}

// A request the cluster part handed to OpenKruise is kruise-daemon's: not touched while labelled;
// once the handover removes the label (adoption), carried out.
func TestExecutorLeavesKruisesRequests(t *testing.T) {
	n, c := setup(t, nil)
	startExecutor(t, n)
	crr := request(t, c, n, "kruises", func(r *v1alpha1.ContainerRecreateRequest) {
		r.Labels[v1alpha1.LabelCRRExecutor] = v1alpha1.CRRExecutorKruise
	})
	holdSummary(t, c, n, crr, " done=false ", 1500*time.Millisecond) // the executor must do nothing
	cur := &v1alpha1.ContainerRecreateRequest{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(crr), cur); err != nil {
		t.Fatal(err)
	}
	delete(cur.Labels, v1alpha1.LabelCRRExecutor)
	if err := c.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	waitSummary(t, c, crr, "Completed done=true a=Succeeded(killed) b=Succeeded(killed)", 10*time.Second)
}

// A request in another namespace whose pod-uid label names this pod (written past admission):
// refused with a message, nothing run, nothing stopped.
func TestExecutorRefusesAnotherNamespacesPod(t *testing.T) {
	n, c := setup(t, nil)
	startExecutor(t, n)
	attacker := fmt.Sprintf("crr-%d", seq.Add(1))
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: attacker}}); err != nil {
		t.Fatal(err)
	}
	crr := request(t, c, n, "cross", func(r *v1alpha1.ContainerRecreateRequest) { r.Namespace = attacker })
	got := waitSummary(t, c, crr, "Completed done=true a=Failed b=Failed", 10*time.Second)
	want := fmt.Sprintf("refused by node node-a: label crr.apps.kruise.io/pod-uid=%s does not name pod %s/web on node node-a", n.pod.UID, attacker)
	if got.Status.Message != want {
		t.Errorf("message %q, want %q", got.Status.Message, want)
	}
	testpoll.Consistently(t, 500*time.Millisecond, noStops(n))
}

// preStop hooks written into the request (not by admission) never run: the pod's own hook of
// a runs, b (which has none in the pod) runs nothing.
func TestExecutorRunsThePodsPreStop(t *testing.T) {
	n, c := setup(t, nil)
	startExecutor(t, n)
	crr := request(t, c, n, "forged", func(r *v1alpha1.ContainerRecreateRequest) {
		r.Spec.Containers[0].PreStop = &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"touch", "/a-forged"}}}
		r.Spec.Containers[1].PreStop = &v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"touch", "/b-forged"}}}
	})
	waitSummary(t, c, crr, "Completed done=true a=Succeeded(killed) b=Succeeded(killed)", 10*time.Second)
	n.mu.Lock()
	defer n.mu.Unlock()
	if fmt.Sprint(n.execs) != "[a1:drain]" {
		t.Errorf("execs %v, want only the pod's own preStop of a", n.execs)
	}
}
