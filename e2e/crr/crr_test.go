// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package crr is the ContainerRecreateRequest end-to-end suite: the cluster deployment
// (admission and lifecycle) and the node service (the kill) on the rig, against a real kubelet
// and containerd. Each scenario is what users of OpenKruise rely on, or a weakness they reported.
package crr

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1beta1"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme, v1beta1.AddToScheme), framework.WithImages(cluster.Image()))
}

const (
	kruisePodReady corev1.PodConditionType = "KruisePodReady"
	// trapLoop exits at once on SIGTERM, so a stop takes no grace period.
	trapLoop = "trap 'exit 0' TERM; while :; do sleep 0.2; done"
)

type suite struct {
	c   *framework.Cluster
	svc *framework.NodeService
}

func TestContainerRecreateRequest(t *testing.T) {
	c := framework.Get(t)
	// First the node alone, as on a cluster where the CRDs and the nodes' RBAC are installed
	// before the cluster deployment (or that moves over from OpenKruise): no webhook completes
	// or checks the requests, the node has to.
	c.InstallCRDs(t)
	s := &suite{c: c, svc: c.StartNodeService(t)}
	s.requireExecutor(t)
	t.Run("without admission", s.withoutAdmission)

	// The cluster deployment from cluster/deploy (CRDs, RBAC, admission policies, webhooks and
	// the Deployment itself), as e2e/cluster deploys it.
	t0 := time.Now()
	if err := cluster.Deploy(framework.Context(t, 4*time.Minute), c, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster deployment ready in %s", time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster deployment:\n%s", cluster.Diagnose(c))
		}
	})

	t.Run("admission", s.admission)
	t.Run("scenarios", func(t *testing.T) {
		t.Run("simple", s.simple)
		t.Run("postStart", s.postStart)
		t.Run("preStop", s.preStop)
		t.Run("unready", s.unready)
		t.Run("injected gate", s.injectedGate)
		t.Run("force", s.force)
		t.Run("two requests", s.twoRequests)
		t.Run("v1beta1", s.v1beta1)
	})
	t.Run("node service killed", s.serviceKilled)
}

// requireExecutor fails at once, and says why, when the node service does not carry out
// ContainerRecreateRequests.
func (s *suite) requireExecutor(t *testing.T) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, time.Minute), 20*time.Second, "the node service's CRR executor",
		func(context.Context) (bool, string, error) {
			return strings.Contains(s.svc.Logs(), "ContainerRecreateRequests synced"), "", nil
		})
	if err != nil {
		t.Fatalf("the node service does not run the ContainerRecreateRequest executor (shim/recreate); "+
			"wire recreate.New into the node service: %v", err)
	}
}

// --- helpers ---

func trap(name string) corev1.Container { return framework.Shell(name, trapLoop) }

func withPreStop(c corev1.Container, cmd ...string) corev1.Container {
	c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}}
	return c
}

func (s *suite) runPod(t *testing.T, ns, name string, grace int64, mut func(*corev1.Pod), containers ...corev1.Container) *corev1.Pod {
	t.Helper()
	pod := framework.NewPod(ns, name, containers...)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	if mut != nil {
		mut(pod)
	}
	pod = s.c.CreatePod(t, pod)
	return s.c.WaitForPodReady(t, pod, 2*time.Minute)
}

func (s *suite) pod(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	cur, err := s.c.Kube.CoreV1().Pods(p.Namespace).Get(framework.Context(t, 10*time.Second), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

func status(p *corev1.Pod, name string) corev1.ContainerStatus {
	if cs := framework.ContainerStatus(p, name); cs != nil {
		return *cs
	}
	return corev1.ContainerStatus{}
}

type crrOpt func(*v1alpha1.ContainerRecreateRequest)

func strategy(f func(*v1alpha1.ContainerRecreateRequestStrategy)) crrOpt {
	return func(r *v1alpha1.ContainerRecreateRequest) {
		if r.Spec.Strategy == nil {
			r.Spec.Strategy = &v1alpha1.ContainerRecreateRequestStrategy{}
		}
		f(r.Spec.Strategy)
	}
}

func (s *suite) create(t *testing.T, pod *corev1.Pod, name string, containers []string, opts ...crrOpt) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	crr := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name},
		Spec:       v1alpha1.ContainerRecreateRequestSpec{PodName: pod.Name},
	}
	for _, c := range containers {
		crr.Spec.Containers = append(crr.Spec.Containers, v1alpha1.ContainerRecreateRequestContainer{Name: c})
	}
	for _, o := range opts {
		o(crr)
	}
	if err := s.c.Client.Create(framework.Context(t, 30*time.Second), crr); err != nil {
		t.Fatalf("creating ContainerRecreateRequest %s: %v", name, err)
	}
	return crr
}

func summary(crr *v1alpha1.ContainerRecreateRequest) string {
	var cs []string
	for _, st := range crr.Status.ContainerRecreateStates {
		c := st.Name + "=" + string(st.Phase)
		if st.IsKilled {
			c += "(killed)"
		}
		if st.Message != "" {
			c += ": " + st.Message
		}
		cs = append(cs, c)
	}
	return fmt.Sprintf("phase=%q message=%q [%s]", crr.Status.Phase, crr.Status.Message, strings.Join(cs, "; "))
}

// wait polls the request until cond holds and returns it.
func (s *suite) wait(t *testing.T, crr *v1alpha1.ContainerRecreateRequest, timeout time.Duration, what string,
	cond func(*v1alpha1.ContainerRecreateRequest) bool) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	cur := &v1alpha1.ContainerRecreateRequest{}
	err := framework.WaitFor(framework.Context(t, timeout+10*time.Second), timeout, crr.Name+" "+what, func(ctx context.Context) (bool, string, error) {
		if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(crr), cur); err != nil {
			return false, err.Error(), nil
		}
		return cond(cur), summary(cur), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

func completed(c *v1alpha1.ContainerRecreateRequest) bool {
	return c.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted
}

func (s *suite) waitCompleted(t *testing.T, crr *v1alpha1.ContainerRecreateRequest, timeout time.Duration) *v1alpha1.ContainerRecreateRequest {
	t.Helper()
	return s.wait(t, crr, timeout, "Completed", completed)
}

func states(crr *v1alpha1.ContainerRecreateRequest) map[string]v1alpha1.ContainerRecreateRequestContainerRecreateState {
	out := map[string]v1alpha1.ContainerRecreateRequestContainerRecreateState{}
	for _, st := range crr.Status.ContainerRecreateStates {
		out[st.Name] = st
	}
	return out
}

func expectStates(t *testing.T, crr *v1alpha1.ContainerRecreateRequest, want string) {
	t.Helper()
	var got []string
	for _, st := range crr.Status.ContainerRecreateStates {
		g := st.Name + "=" + string(st.Phase)
		if st.IsKilled {
			g += "(killed)"
		}
		got = append(got, g)
	}
	if strings.Join(got, " ") != want {
		t.Errorf("container states %q, want %q (%s)", strings.Join(got, " "), want, summary(crr))
	}
}

func stripID(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		return rest
	}
	return id
}

// stoppedAt is when a container instance exited, from the runtime (nanoseconds; the pod status
// has whole seconds).
func (s *suite) stoppedAt(t *testing.T, containerID string) time.Time {
	t.Helper()
	rs, conn, err := s.c.CRI()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := rs.ContainerStatus(framework.Context(t, 10*time.Second), &runtimeapi.ContainerStatusRequest{ContainerId: stripID(containerID)})
	if grpcstatus.Code(err) == codes.NotFound {
		// The kubelet's container GC removed the exited instance already: the pods' statuses keep
		// its end as the last state (whole seconds).
		if at, ok := s.finishedInStatus(t, containerID); ok {
			t.Logf("container %s removed by the kubelet; its end from the pod's status: %s", containerID, at.Format(time.RFC3339))
			return at
		}
	}
	if err != nil {
		t.Fatalf("status of container %s: %v", containerID, err)
	}
	if st.GetStatus().GetFinishedAt() == 0 {
		t.Fatalf("container %s has not exited (%s)", containerID, st.GetStatus().GetState())
	}
	return time.Unix(0, st.GetStatus().GetFinishedAt())
}

// finishedInStatus finds containerID as a last state in the pods of the test namespaces.
func (s *suite) finishedInStatus(t *testing.T, containerID string) (time.Time, bool) {
	t.Helper()
	pods, err := s.c.Kube.CoreV1().Pods("").List(framework.Context(t, 10*time.Second), metav1.ListOptions{})
	if err != nil {
		return time.Time{}, false
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.LastTerminationState.Terminated; term != nil && term.ContainerID == containerID {
				return term.FinishedAt.Time, true
			}
		}
	}
	return time.Time{}, false
}

// restarted waits until the pod reports container name running with restartCount want.
func (s *suite) restarted(t *testing.T, pod *corev1.Pod, name string, want int32, timeout time.Duration) *corev1.Pod {
	t.Helper()
	p, err := s.c.WaitForPod(framework.Context(t, timeout+10*time.Second), pod.Namespace, pod.Name, timeout,
		fmt.Sprintf("%s running with restartCount %d", name, want), func(p *corev1.Pod) bool {
			cs := framework.ContainerStatus(p, name)
			return cs != nil && cs.RestartCount == want && cs.State.Running != nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (s *suite) killingEvents(t *testing.T, pod *corev1.Pod, crr string) []string {
	t.Helper()
	return s.events(t, pod, "Killing", crr)
}

// events returns the messages of pod's events with reason that name ContainerRecreateRequest crr,
// each as often as it was counted.
func (s *suite) events(t *testing.T, pod *corev1.Pod, reason, crr string) []string {
	t.Helper()
	evs, err := s.c.Events(framework.Context(t, 10*time.Second), pod.Namespace, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Reason == reason && strings.Contains(e.Message, "ContainerRecreateRequest "+crr) {
			for i := int32(0); i < max(e.Count, 1); i++ {
				out = append(out, e.Message)
			}
		}
	}
	return out
}

// --- scenarios ---

// One container with minStartedSeconds and a TTL; then two at once.
func (s *suite) simple(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "simple", 1, nil, trap("main"), trap("side"))
	before := status(pod, "main")

	crr := s.create(t, pod, "one", []string{"main"}, strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) { st.MinStartedSeconds = 5 }),
		func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.TTLSecondsAfterFinished = ptr.To[int32](3) })
	// Admission completed it from the pod.
	if l := crr.Labels; l[v1alpha1.LabelCRRPodUID] != string(pod.UID) || l[v1alpha1.LabelCRRNodeName] != s.c.Rig.NodeName() || l[v1alpha1.LabelCRRActive] != "true" {
		t.Errorf("labels %v", l)
	}
	if crr.Spec.Strategy.FailurePolicy != v1alpha1.ContainerRecreateRequestFailurePolicyFail {
		t.Errorf("failurePolicy %q", crr.Spec.Strategy.FailurePolicy)
	}
	if sc := crr.Spec.Containers[0].StatusContext; sc == nil || sc.ContainerID != before.ContainerID || sc.RestartCount != before.RestartCount {
		t.Errorf("statusContext %+v, pod status %s/%d", sc, before.ContainerID, before.RestartCount)
	}

	done := s.waitCompleted(t, crr, time.Minute)
	expectStates(t, done, "main=Succeeded(killed)")
	after := s.pod(t, pod)
	m := status(after, "main")
	if m.ContainerID == before.ContainerID || m.RestartCount != 1 || m.State.Running == nil {
		t.Errorf("main after: %s restartCount %d running %v", m.ContainerID, m.RestartCount, m.State.Running != nil)
	}
	if side := status(after, "side"); side.RestartCount != 0 {
		t.Errorf("side restarted %d times", side.RestartCount)
	}
	if ran := done.Status.CompletionTime.Sub(m.State.Running.StartedAt.Time); ran < 4*time.Second { // whole seconds on both
		t.Errorf("completed %v after the new container started, want minStartedSeconds 5", ran)
	}
	if evs := s.killingEvents(t, pod, "one"); len(evs) != 1 || !strings.Contains(evs[0], "Stopping container main") {
		t.Errorf("Killing events %q", evs)
	}
	s.wait(t, crr, 15*time.Second, "without the active label", func(c *v1alpha1.ContainerRecreateRequest) bool {
		_, ok := c.Labels[v1alpha1.LabelCRRActive]
		return !ok
	})
	err := framework.WaitFor(framework.Context(t, time.Minute), 20*time.Second, "one deleted by its TTL", func(ctx context.Context) (bool, string, error) {
		err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(crr), &v1alpha1.ContainerRecreateRequest{})
		return apierrors.IsNotFound(err), fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	both := s.create(t, pod, "both", []string{"main", "side"})
	expectStates(t, s.waitCompleted(t, both, time.Minute), "main=Succeeded(killed) side=Succeeded(killed)")
	after = s.pod(t, pod)
	if m, sd := status(after, "main"), status(after, "side"); m.RestartCount != 2 || sd.RestartCount != 1 {
		t.Errorf("restart counts main %d side %d, want 2 and 1", m.RestartCount, sd.RestartCount)
	}
}

// A postStart hook of 5 s keeps a recreated container from counting as back: unordered, both
// stop together; ordered, the second stops only once the first is back.
func (s *suite) postStart(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	slow := trap("a")
	slow.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}}
	pod := s.runPod(t, ns, "poststart", 1, nil, slow, trap("b"))

	a1, b1 := status(pod, "a").ContainerID, status(pod, "b").ContainerID
	s.waitCompleted(t, s.create(t, pod, "unordered", []string{"a", "b"}), time.Minute)
	if d := s.stoppedAt(t, b1).Sub(s.stoppedAt(t, a1)).Abs(); d > 4*time.Second {
		t.Errorf("unordered: a and b stopped %v apart", d)
	}

	pod = s.restarted(t, pod, "a", 1, time.Minute)
	pod = s.restarted(t, pod, "b", 1, time.Minute)
	a2, b2 := status(pod, "a").ContainerID, status(pod, "b").ContainerID
	ordered := s.create(t, pod, "ordered", []string{"a", "b"}, strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) { st.OrderedRecreate = true }))
	expectStates(t, s.waitCompleted(t, ordered, 2*time.Minute), "a=Succeeded(killed) b=Succeeded(killed)")
	if d := s.stoppedAt(t, b2).Sub(s.stoppedAt(t, a2)); d < 5*time.Second {
		t.Errorf("ordered: b stopped %v after a, want at least the 5 s of a's postStart", d)
	}
}

// preStop sleep 8 runs before the stop; activeDeadlineSeconds 3 ends the request and no
// container is stopped after that.
func (s *suite) preStop(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "prestop", 30, nil, trap("a"), withPreStop(trap("b"), "sleep", "8"))

	a1, b1 := status(pod, "a").ContainerID, status(pod, "b").ContainerID
	crr := s.create(t, pod, "hook", []string{"a", "b"})
	s.waitCompleted(t, crr, time.Minute)
	created := crr.CreationTimestamp.Time // whole seconds, rounded down
	if d := s.stoppedAt(t, b1).Sub(created); d < 8*time.Second {
		t.Errorf("b stopped %v after the request, before its preStop sleep 8 ended", d)
	}
	// "At once": well before b's preStop ends, with room for a loaded machine.
	if d := s.stoppedAt(t, a1).Sub(created); d > 7*time.Second {
		t.Errorf("a stopped %v after the request, want at once (before b's preStop sleep 8 ends)", d)
	}

	pod = s.restarted(t, pod, "b", 1, time.Minute)
	b2 := status(pod, "b")
	deadline := s.create(t, pod, "deadline", []string{"b"}, func(r *v1alpha1.ContainerRecreateRequest) { r.Spec.ActiveDeadlineSeconds = ptr.To[int64](3) })
	done := s.waitCompleted(t, deadline, 15*time.Second)
	if d := done.Status.CompletionTime.Sub(deadline.CreationTimestamp.Time); d > 6*time.Second {
		t.Errorf("completed %v after creation, want about 3 s", d)
	}
	if !strings.Contains(done.Status.Message, "activeDeadlineSeconds") {
		t.Errorf("message %q", done.Status.Message)
	}
	if st := states(done)["b"]; st.Phase != v1alpha1.ContainerRecreateRequestFailed || st.IsKilled {
		t.Errorf("b: %+v", st)
	}
	// Until past the end of the hook the request's preStop would have had: b is never stopped.
	err := framework.Never(framework.Context(t, time.Minute), time.Until(deadline.CreationTimestamp.Add(12*time.Second)),
		"b stopped after the request completed", func(context.Context) (bool, string, error) {
			b := status(s.pod(t, pod), "b")
			return b.ContainerID != b2.ContainerID || b.RestartCount != b2.RestartCount,
				fmt.Sprintf("%s restartCount %d, was %s %d", b.ContainerID, b.RestartCount, b2.ContainerID, b2.RestartCount), nil
		})
	if err != nil {
		t.Error(err)
	}
}

// unreadyGracePeriodSeconds 1 with terminationGracePeriodSeconds 3: the pod is made not ready
// (KruisePodReady gate) before anything happens, the preStop sleep 8 starts no sooner than the
// unready grace after that and is cut short by the 3 s grace from its start, and the pod is ready
// again afterwards. The hook notes when it starts (the kernel's uptime, in a volume that outlives
// the container), so each bound is judged on the step it is about; the hops between the cluster
// part and the node (the API server's writes and watches, seconds on a loaded machine) are
// logged, not bounded tightly.
func (s *suite) unready(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	b := withPreStop(trap("b"), "sh", "-c", "cat /proc/uptime > /shared/prestop-start; exec sleep 8")
	b.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	pod := framework.NewPod(ns, "gated", b)
	pod.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: kruisePodReady}}
	pod = s.c.CreatePod(t, pod)
	// The workload's controller would open the gate; here the test does.
	_, err := s.c.WaitForPod(framework.Context(t, 2*time.Minute), ns, pod.Name, 2*time.Minute, "b running", func(p *corev1.Pod) bool {
		cs := framework.ContainerStatus(p, "b")
		return cs != nil && cs.State.Running != nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.setGate(t, pod, corev1.ConditionTrue)
	pod = s.c.WaitForPodReady(t, pod, time.Minute)
	b1 := status(pod, "b").ContainerID

	readiness := s.watchReadiness(t, pod)

	crr := s.create(t, pod, "drain", []string{"b"}, strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) {
		st.TerminationGracePeriodSeconds = ptr.To[int64](3)
		st.UnreadyGracePeriodSeconds = ptr.To[int64](1)
	}))
	expectStates(t, s.waitCompleted(t, crr, time.Minute), "b=Succeeded(killed)")
	stopped := s.stoppedAt(t, b1)
	_, err = s.c.WaitForPod(framework.Context(t, time.Minute), ns, pod.Name, 30*time.Second, "ready again", func(p *corev1.Pod) bool {
		return framework.PodReady(p) && framework.PodCondition(p, kruisePodReady) == corev1.ConditionTrue
	})
	if err != nil {
		t.Fatal(err)
	}
	unreadyAt, readyAgainAt := readiness()
	if unreadyAt.IsZero() || !unreadyAt.Before(stopped) {
		t.Fatalf("the pod was not made not ready before b stopped (not ready at %v, stopped at %v)", unreadyAt, stopped)
	}
	hookAt := s.uptimeNoted(t, pod, "b", "/shared/prestop-start")
	d, hook, wait := stopped.Sub(unreadyAt), stopped.Sub(hookAt), hookAt.Sub(unreadyAt)
	t.Logf("b stopped %v after the pod went not ready: the preStop started %v after it, and was cut %v after its start",
		d.Round(time.Millisecond), wait.Round(time.Millisecond), hook.Round(time.Millisecond))
	// The unready grace, then the hook's 3 s grace: b stops no sooner than 4 s after the pod went
	// not ready. The hook's own note of its start is not the node's start of the grace: it comes
	// after the exec has started a process in the container, which a loaded machine has taken
	// 1.8 s to do (cut 1.8 s after the note, 3 s after the node started it; CI). Cut well before
	// the 8 s an uncut hook would take (the stop itself takes a moment more), and no step hanging.
	if d < 4*time.Second || hook > 6500*time.Millisecond || wait > 20*time.Second {
		// The node service's steps with their times, to tell which one took the time.
		var steps []string
		for _, line := range strings.Split(s.svc.Logs(), "\n") {
			if strings.Contains(line, crr.Name) || strings.Contains(line, "gated") {
				steps = append(steps, line)
			}
		}
		t.Errorf("b stopped %v after the pod went not ready (not ready seen at %s, preStop started at %s, stopped at %s), want 1 s of "+
			"unready grace and a preStop cut at the 3 s grace from its start; the node service's log of the request:\n%s", d,
			unreadyAt.Format(time.RFC3339Nano), hookAt.Format(time.RFC3339Nano), stopped.Format(time.RFC3339Nano),
			logtail.Last(strings.Join(steps, "\n"), 30))
	}
	if readyAgainAt.IsZero() || readyAgainAt.Before(stopped) {
		t.Errorf("ready again at %v, b stopped at %v", readyAgainAt, stopped)
	}
}

// uptimeNoted reads the kernel uptime a container wrote to file (/proc/uptime's first field) and
// returns it as wall-clock time: the test and the pod share the kernel, whose uptime is not
// namespaced.
func (s *suite) uptimeNoted(t *testing.T, pod *corev1.Pod, container, file string) time.Time {
	t.Helper()
	out, _, err := s.c.Exec(framework.Context(t, 30*time.Second), pod.Namespace, pod.Name, container, "cat", file)
	if err != nil {
		t.Fatalf("reading %s in %s: %v", file, container, err)
	}
	noted, err := uptime(out)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	own, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	up, err := uptime(string(own))
	if err != nil {
		t.Fatal(err)
	}
	return now.Add(noted - up)
}

// uptime parses /proc/uptime's first field.
func uptime(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("no uptime in %q", s)
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// watchReadiness polls pod's readiness (Ready and KruisePodReady both True) from now on until the
// returned function is called; that looks once more and returns when the pod first went not
// ready and when it was ready again after that (zero when not seen).
func (s *suite) watchReadiness(t *testing.T, pod *corev1.Pod) func() (unreadyAt, readyAgainAt time.Time) {
	var unreadyAt, readyAgainAt time.Time
	look := func(ctx context.Context) {
		if p, err := s.c.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
			ready := framework.PodReady(p) && framework.PodCondition(p, kruisePodReady) == corev1.ConditionTrue
			if !ready && unreadyAt.IsZero() {
				unreadyAt = time.Now()
			}
			if ready && !unreadyAt.IsZero() && readyAgainAt.IsZero() {
				readyAgainAt = time.Now()
			}
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			look(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stop(); <-watched })
	return func() (time.Time, time.Time) {
		stop()
		<-watched
		look(framework.Context(t, 10*time.Second))
		return unreadyAt, readyAgainAt
	}
}

func (s *suite) setGate(t *testing.T, pod *corev1.Pod, st corev1.ConditionStatus) {
	t.Helper()
	body := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"lastTransitionTime":%q}]}}`,
		kruisePodReady, st, time.Now().UTC().Format(time.RFC3339))
	if _, err := s.c.Kube.CoreV1().Pods(pod.Namespace).Patch(framework.Context(t, 10*time.Second), pod.Name,
		types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// A container that restarted on its own while the request waited: counted done without a stop,
// unless forceRecreate; with orderedRecreate too, the next follows once it is back.
func (s *suite) force(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	// The request's unready grace is the window in which the test restarts the container itself
	// (an exec through the API server and the kubelet's restart): the node stops nothing before it
	// ends. 3 s was too short on a loaded machine (the node stopped the first instance before the
	// exec's kill came); the test says when its restart came too late for the window.
	const grace = 10 * time.Second
	wait := strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) {
		st.UnreadyGracePeriodSeconds = ptr.To(int64(grace / time.Second))
	})
	selfRestart := func(pod *corev1.Pod, name string, to int32, requested time.Time) *corev1.Pod {
		if _, _, err := s.c.Exec(framework.Context(t, 10*time.Second), ns, pod.Name, name, "kill", "1"); err != nil {
			t.Fatal(err)
		}
		p := s.restarted(t, pod, name, to, 30*time.Second)
		if took := time.Since(requested); took >= grace {
			t.Errorf("%s restarted %s after the request, past its %s unready grace: the node may have stopped it first", name, took.Round(time.Millisecond), grace)
		}
		return p
	}

	plain := s.runPod(t, ns, "plain", 1, nil, trap("a"))
	requested := time.Now()
	crr := s.create(t, plain, "plain", []string{"a"}, wait)
	selfRestart(plain, "a", 1, requested)
	done := s.waitCompleted(t, crr, time.Minute)
	expectStates(t, done, "a=Succeeded")
	// As OpenKruise's: a Succeeded state has no message (clients compare it); the pod's event says
	// why nothing was stopped.
	if m := states(done)["a"].Message; m != "" {
		t.Errorf("message %q, want none", m)
	}
	if err := framework.WaitFor(framework.Context(t, 30*time.Second), 20*time.Second, "an AlreadyRestarted event",
		func(context.Context) (bool, string, error) {
			evs := s.events(t, plain, "AlreadyRestarted", crr.Name)
			return len(evs) == 1 && strings.Contains(evs[0], "restarted on its own"), fmt.Sprintf("events %q", evs), nil
		}); err != nil {
		t.Error(err)
	}
	err := framework.Never(framework.Context(t, time.Minute), 2*time.Second, "a second restart without forceRecreate",
		func(context.Context) (bool, string, error) {
			n := status(s.pod(t, plain), "a").RestartCount
			return n != 1, fmt.Sprintf("restartCount %d, want 1", n), nil
		})
	if err != nil {
		t.Error(err)
	}

	forced := s.runPod(t, ns, "forced", 1, nil, trap("a"), trap("b"))
	requested = time.Now()
	crr = s.create(t, forced, "forced", []string{"a", "b"}, wait, strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) {
		st.ForceRecreate, st.OrderedRecreate = true, true
	}))
	forced = selfRestart(forced, "a", 1, requested)
	a2 := status(forced, "a").ContainerID
	expectStates(t, s.waitCompleted(t, crr, 2*time.Minute), "a=Succeeded(killed) b=Succeeded(killed)")
	after := s.pod(t, forced)
	if a, b := status(after, "a"), status(after, "b"); a.RestartCount != 2 || b.RestartCount != 1 {
		t.Errorf("forceRecreate: restart counts a %d b %d, want 2 and 1", a.RestartCount, b.RestartCount)
	}
	if s.stoppedAt(t, status(after, "b").LastTerminationState.Terminated.ContainerID).Before(s.stoppedAt(t, a2)) {
		t.Error("ordered: b stopped before a")
	}
}

// Two requests for one pod, created back to back, both complete, one after the other.
func (s *suite) twoRequests(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "queue", 1, nil, trap("a"), trap("b"))
	b1 := status(pod, "b").ContainerID
	first := s.create(t, pod, "first", []string{"a"}, strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) { st.MinStartedSeconds = 3 }))
	second := s.create(t, pod, "second", []string{"b"})
	f := s.waitCompleted(t, first, time.Minute)
	sc := s.waitCompleted(t, second, time.Minute)
	expectStates(t, f, "a=Succeeded(killed)")
	expectStates(t, sc, "b=Succeeded(killed)")
	if s.stoppedAt(t, b1).Before(f.Status.CompletionTime.Time) {
		t.Errorf("b stopped at %v, before the first request completed at %v", s.stoppedAt(t, b1), f.Status.CompletionTime)
	}
	after := s.pod(t, pod)
	if a, b := status(after, "a"), status(after, "b"); a.RestartCount != 1 || b.RestartCount != 1 {
		t.Errorf("restart counts a %d b %d", a.RestartCount, b.RestartCount)
	}
}

// kill -9 of the node service while a request is Recreating: a is in its preStop hook, b's stop
// (SIGTERM ignored, 6 s grace) is under way. Started again, the service completes the request
// and each container was restarted exactly once.
func (s *suite) serviceKilled(t *testing.T) {
	ns := s.c.Namespace(t)
	pod := s.runPod(t, ns, "crash", 30, nil, withPreStop(trap("a"), "sleep", "4"), framework.Command("b", "sleep", "1000000"))
	crr := s.create(t, pod, "crash", []string{"a", "b"}, strategy(func(st *v1alpha1.ContainerRecreateRequestStrategy) {
		st.TerminationGracePeriodSeconds = ptr.To[int64](6)
	}))
	s.wait(t, crr, 30*time.Second, "b being stopped and a in its preStop hook", func(c *v1alpha1.ContainerRecreateRequest) bool {
		st := states(c)
		return st["b"].IsKilled && st["a"].Phase == v1alpha1.ContainerRecreateRequestRecreating && !st["a"].IsKilled
	})
	s.svc.Kill() // returns once the process is gone
	// measures: the request goes on without the service for a second (b's stop runs on in the kubelet)
	time.Sleep(time.Second)
	s.svc.Start(t)
	expectStates(t, s.waitCompleted(t, crr, 90*time.Second), "a=Succeeded(killed) b=Succeeded(killed)")
	// Both restarts reach the pod's status; then, for 2 s, no second one.
	counts := func(p *corev1.Pod) (int32, int32) { return status(p, "a").RestartCount, status(p, "b").RestartCount }
	if _, err := s.c.WaitForPod(framework.Context(t, time.Minute), ns, pod.Name, 30*time.Second, "a and b restarted",
		func(p *corev1.Pod) bool { a, b := counts(p); return a >= 1 && b >= 1 }); err != nil {
		t.Fatal(err)
	}
	err := framework.Never(framework.Context(t, time.Minute), 2*time.Second, "a second restart", func(context.Context) (bool, string, error) {
		a, b := counts(s.pod(t, pod))
		return a != 1 || b != 1, fmt.Sprintf("restart counts a %d b %d, want exactly 1 each", a, b), nil
	})
	if err != nil {
		t.Error(err)
	}
}
