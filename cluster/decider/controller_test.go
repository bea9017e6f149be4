// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/kruiseapi"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// The decider against a real API server: the NodePodProbe status plays the node service, the
// test plays the CRR executor (it completes the requests).

const configNamespace = "probeshim-system"

var (
	env        *testenv.Env
	skipReason string
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error {
		// Fast backoff so the tests see a second restart within seconds.
		if err := writeConfig(mgr.GetConfig(), "backoff: {initial: 1s, max: 4s}"); err != nil {
			return err
		}
		// OpenKruise's PodUnavailableBudget is served before the decider starts, as on a
		// cluster with Kruise installed: the decider honours it.
		if _, err := envtest.InstallCRDs(mgr.GetConfig(), envtest.CRDInstallOptions{
			Paths: []string{"testdata/podunavailablebudgets.yaml"}, ErrorIfPathMissing: true}); err != nil {
			return err
		}
		return SetupWithManager(mgr, Options{Namespace: configNamespace})
	}, &env, &skipReason)
}

// writeConfig, before the manager runs, creates the config namespace and ConfigMap.
func writeConfig(cfg *rest.Config, doc string) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: configNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: configNamespace},
		Data: map[string]string{ConfigKey: doc}}
	return c.Create(ctx, cm)
}

// replicaSet is a ReplicaSet controlled by Deployment deployment (which need not exist: no
// garbage collector runs here).
func replicaSet(ns, name, deployment string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": deployment}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: "deployment-" + types.UID(deployment),
			Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
			},
		},
	}
}

type fixture struct {
	t       *testing.T
	ns      string
	node    string
	nodeObj *corev1.Node
}

func newFixture(t *testing.T) *fixture {
	testenv.Require(t, env, skipReason)
	f := &fixture{t: t, ns: env.Namespace(t)}
	f.nodeObj = env.Node(t, true)
	f.node = f.nodeObj.Name
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: f.node}}
	if err := env.Client.Create(context.Background(), npp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), npp) })
	return f
}

// deployment makes n Ready enhanced-liveness pods of a Deployment (through a ReplicaSet).
func (f *fixture) deployment(name string, n int, edit func(*corev1.Pod)) []*corev1.Pod {
	f.t.Helper()
	ctx := context.Background()
	typed := replicaSet(f.ns, name+"-rs", name)
	if err := env.Client.Create(ctx, typed); err != nil {
		f.t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", name, i), Namespace: f.ns,
				Labels:      map[string]string{"app": name},
				Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: typed.Name,
					UID: typed.UID, Controller: ptr.To(true)}},
			},
			Spec: corev1.PodSpec{NodeName: f.node, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
		}
		if edit != nil {
			edit(pod)
		}
		pods = append(pods, f.ready(pod))
	}
	return pods
}

func (f *fixture) ready(pod *corev1.Pod) *corev1.Pod {
	f.t.Helper()
	pod = env.RunningPod(f.t, pod, "10.0.0.1")
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, ContainerID: "containerd://" + string(pod.UID) + "-" + c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}},
		})
	}
	if err := env.Client.Status().Update(context.Background(), pod); err != nil {
		f.t.Fatal(err)
	}
	return pod
}

// setStates writes the liveness states of pods into the node's NodePodProbe status, as the node
// service would: state for the listed pods, Succeeded for the rest.
func (f *fixture) setStates(all []*corev1.Pod, state v1alpha1.ProbeState, since time.Time, failing ...*corev1.Pod) {
	f.t.Helper()
	ctx := context.Background()
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: f.node}, npp); err != nil {
		f.t.Fatal(err)
	}
	npp.Status.PodProbeStatuses = nil
	for _, p := range all {
		st := v1alpha1.ProbeSucceeded
		for _, fp := range failing {
			if fp.UID == p.UID {
				st = state
			}
		}
		npp.Status.PodProbeStatuses = append(npp.Status.PodProbeStatuses, v1alpha1.PodProbeStatus{
			Name: p.Name, Namespace: p.Namespace, UID: string(p.UID),
			ProbeStates: []v1alpha1.ContainerProbeState{{Name: v1alpha1.LivenessProbeName("app"), State: st,
				LastProbeTime: metav1.Now(), LastTransitionTime: metav1.NewTime(since)}},
		})
	}
	if err := env.Client.Status().Update(ctx, npp); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) requests() []v1alpha1.ContainerRecreateRequest {
	f.t.Helper()
	var list v1alpha1.ContainerRecreateRequestList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	return list.Items
}

func (f *fixture) waitRequests(n int) []v1alpha1.ContainerRecreateRequest {
	f.t.Helper()
	var got []v1alpha1.ContainerRecreateRequest
	poll.Eventually(f.t, 10*time.Second, func() error {
		if got = f.requests(); len(got) != n {
			return fmt.Errorf("%d requests, want %d", len(got), n)
		}
		return nil
	})
	return got
}

// complete finishes the request as the node service would.
func (f *fixture) complete(crr *v1alpha1.ContainerRecreateRequest, phase v1alpha1.ContainerRecreateRequestPhase) {
	f.t.Helper()
	crr.Status = v1alpha1.ContainerRecreateRequestStatus{
		Phase: v1alpha1.ContainerRecreateRequestCompleted, CompletionTime: ptr.To(metav1.Now()),
		ContainerRecreateStates: []v1alpha1.ContainerRecreateRequestContainerRecreateState{{Name: "app", Phase: phase}},
	}
	if err := env.Client.Status().Update(context.Background(), crr); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) record(pod *corev1.Pod) Record {
	f.t.Helper()
	cur := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		f.t.Fatal(err)
	}
	r, err := ParseRecord(cur.Annotations)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// waitEvent waits for an event on pod with reason whose note contains text.
func (f *fixture) waitEvent(pod *corev1.Pod, reason, text string) {
	f.t.Helper()
	poll.Eventually(f.t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name == pod.Name {
				if e.Reason == reason && strings.Contains(e.Note, text) {
					return nil
				}
				seen = append(seen, e.Reason+": "+e.Note)
			}
		}
		return fmt.Errorf("no %s event with %q on %s; seen %q", reason, text, pod.Name, seen)
	})
}

// waitDecision waits for the decider's last decision on pod (ConditionLivenessRestart) to say
// status and reason.
func (f *fixture) waitDecision(pod *corev1.Pod, status corev1.ConditionStatus, reason Reason) {
	f.t.Helper()
	poll.Eventually(f.t, 10*time.Second, func() error {
		cur := &corev1.Pod{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
			return err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == ConditionLivenessRestart {
				if c.Status != status || c.Reason != string(reason) || c.Message == "" {
					return fmt.Errorf("condition %s %s: %s", c.Status, c.Reason, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("no condition %s on %s", ConditionLivenessRestart, pod.Name)
	})
}

// setContainer writes the app container's status of pod as the kubelet would.
func (f *fixture) setContainer(pod *corev1.Pod, edit func(*corev1.ContainerStatus)) {
	f.t.Helper()
	cur := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), cur); err != nil {
		f.t.Fatal(err)
	}
	edit(&cur.Status.ContainerStatuses[0])
	if err := env.Client.Status().Update(context.Background(), cur); err != nil {
		f.t.Fatal(err)
	}
}

// deciderEvents are the reasons of the decider's events on pod.
func (f *fixture) deciderEvents(pod *corev1.Pod) []string {
	f.t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		switch e.Reason {
		case EventReasonRestart, EventReasonDryRun, EventReasonHeld, EventReasonRestartFailed:
		default:
			continue
		}
		if e.Regarding.Name == pod.Name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// An exit is not a liveness failure: a Failed state the node has not yet turned Unknown, of a
// container that exited or that the kubelet has restarted since, restarts nothing and is not
// told on the pod. The container's next real failure is acted on as before.
func TestExitIsNotALivenessFailure(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("exits", 6, nil)
	exiting := pods[1]
	since := time.Now().Truncate(time.Second)
	f.setContainer(exiting, func(cs *corev1.ContainerStatus) {
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
		cs.Ready = false
	})
	f.setStates(pods, v1alpha1.ProbeFailed, since, exiting)
	quiet := func() error {
		if n := len(f.requests()); n != 0 {
			return fmt.Errorf("%d requests for an exit", n)
		}
		if ev := f.deciderEvents(exiting); len(ev) != 0 {
			return fmt.Errorf("events for an exit: %q", ev)
		}
		return nil
	}
	poll.Consistently(t, 2*time.Second, quiet)

	// The kubelet restarts it: a new instance, started after the state turned Failed.
	f.setContainer(exiting, func(cs *corev1.ContainerStatus) {
		cs.ContainerID += "-2"
		cs.RestartCount++
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(since.Add(time.Second))}}
	})
	poll.Consistently(t, 2*time.Second, quiet)

	// The new instance fails its probe: that is a liveness failure.
	f.setStates(pods, v1alpha1.ProbeFailed, since.Add(2*time.Second), exiting)
	if crr := f.waitRequests(1)[0]; crr.Spec.PodName != exiting.Name {
		t.Fatalf("restarted %s, want %s", crr.Spec.PodName, exiting.Name)
	}
}

func TestRestartOnceThroughARequest(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("web", 6, func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(7)) })
	since := time.Now().Add(-time.Second).Truncate(time.Second)
	f.setStates(pods, v1alpha1.ProbeFailed, since, pods[2])

	crr := f.waitRequests(1)[0]
	if crr.Spec.PodName != pods[2].Name || len(crr.Spec.Containers) != 1 || crr.Spec.Containers[0].Name != "app" ||
		crr.Labels[LabelCreatedBy] != ControllerName || crr.Spec.Strategy == nil ||
		crr.Spec.Strategy.FailurePolicy != v1alpha1.ContainerRecreateRequestFailurePolicyFail ||
		ptr.Deref(crr.Spec.Strategy.TerminationGracePeriodSeconds, 0) != 7 || crr.Spec.TTLSecondsAfterFinished == nil {
		t.Fatalf("request: %+v", crr)
	}
	rec := f.record(pods[2])
	if rec.Request != crr.Name || rec.Containers["app"].Restarts != 1 || !rec.Containers["app"].Failure.Time.Equal(since) {
		t.Fatalf("record: %+v", rec)
	}
	f.waitEvent(pods[2], EventReasonRestart, crr.Name)

	// The node restarts the container; the decider deletes its finished request and keeps the
	// record. The stale Failed state (same transition time) restarts nothing more.
	f.complete(&crr, v1alpha1.ContainerRecreateRequestSucceeded)
	f.waitRequests(0)
	poll.Eventually(t, 5*time.Second, func() error {
		if r := f.record(pods[2]); r.Request != "" {
			return fmt.Errorf("record still names request %s", r.Request)
		}
		return nil
	})
	poll.Consistently(t, 1500*time.Millisecond, func() error {
		if n := len(f.requests()); n != 0 {
			return fmt.Errorf("%d new requests for the same failure", n)
		}
		return nil
	})

	// A new failure after the restart: restarted again, once the 1s backoff is over.
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now().Truncate(time.Second).Add(time.Second), pods[2])
	crr2 := f.waitRequests(1)[0]
	if crr2.Name == crr.Name {
		t.Fatal("the second failure reused the first request's name")
	}
	if r := f.record(pods[2]); r.Containers["app"].Restarts != 2 {
		t.Errorf("second restart counted as %d", r.Containers["app"].Restarts)
	}
}

// A node that is not Ready holds its pods' restarts and says so; Ready again, it releases them.
func TestNotReadyNodeHoldsRestarts(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("web", 6, nil)
	env.SetNodeReady(t, f.nodeObj, false)
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now().Add(-time.Second).Truncate(time.Second), pods[1])
	f.waitEvent(pods[1], EventReasonHeld, "("+string(ReasonNodeNotReady)+")")
	poll.Consistently(t, time.Second, func() error {
		if n := len(f.requests()); n != 0 {
			return fmt.Errorf("%d requests on a node that is not Ready", n)
		}
		return nil
	})
	env.SetNodeReady(t, f.nodeObj, true)
	if crr := f.waitRequests(1)[0]; crr.Spec.PodName != pods[1].Name {
		t.Fatalf("request for %s, want %s", crr.Spec.PodName, pods[1].Name)
	}
}

// Most pods of one node failing at once while the other node's do not: the node is the suspect,
// and its pods' restarts are held; once the other node's pods fail as much, the node is not
// singled out and the restarts go on (each workload here has one pod, so no workload breaker).
func TestNodeBreaker(t *testing.T) {
	f := newFixture(t)
	var pods []*corev1.Pod
	for _, name := range []string{"w1", "w2", "w3", "w4"} {
		pods = append(pods, f.deployment(name, 1, nil)...)
	}
	other := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: testenv.Name("other-node")}}
	if err := env.Client.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), other) })
	otherStates := func(failing int) {
		t.Helper()
		other.Status.PodProbeStatuses = nil
		for i := range 4 {
			st := v1alpha1.ProbeSucceeded
			if i < failing {
				st = v1alpha1.ProbeFailed
			}
			other.Status.PodProbeStatuses = append(other.Status.PodProbeStatuses, v1alpha1.PodProbeStatus{
				Name: fmt.Sprintf("elsewhere-%d", i), Namespace: f.ns, UID: fmt.Sprintf("uid-elsewhere-%d", i),
				ProbeStates: []v1alpha1.ContainerProbeState{{Name: v1alpha1.LivenessProbeName("app"), State: st}}})
		}
		if err := env.Client.Status().Update(context.Background(), other); err != nil {
			t.Fatal(err)
		}
	}
	otherStates(0)
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now().Add(-time.Second).Truncate(time.Second), pods[0], pods[1], pods[2])
	f.waitEvent(pods[0], EventReasonHeld, "3 of the 4 pods with liveness results on node "+f.node+" fail at once (0 of 4 on the other nodes)")
	poll.Consistently(t, time.Second, func() error {
		if n := len(f.requests()); n != 0 {
			return fmt.Errorf("%d requests on a suspected node", n)
		}
		return nil
	})
	otherStates(3)
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now().Add(-time.Second).Truncate(time.Second), pods[0], pods[1], pods[2])
	poll.Eventually(t, 10*time.Second, func() error {
		if n := len(f.requests()); n != 3 {
			return fmt.Errorf("%d requests, want the 3 failing pods restarted once the failures are not the node's alone", n)
		}
		return nil
	})
}

func TestCircuitBreakerHoldsAll(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("bad-probe", 6, nil)
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods...)
	for _, p := range pods {
		f.waitEvent(p, EventReasonHeld, string(ReasonCircuitBreakerOpen))
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests with the breaker open", n)
	}
	// Most recover: the breaker closes and the one still failing is restarted.
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[0])
	if crr := f.waitRequests(1)[0]; crr.Spec.PodName != pods[0].Name {
		t.Fatalf("restarted %s, want %s", crr.Spec.PodName, pods[0].Name)
	}
}

func TestPodDisruptionBudgetPacesRestarts(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("paced", 6, nil)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "paced", Namespace: f.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "paced"}}},
	}
	// The disruption controller's count (none runs here): 6 healthy, 5 needed. The decider
	// counts the restarts in flight itself.
	f.budget(pdb, policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 6, DesiredHealthy: 5, DisruptionsAllowed: 1, ExpectedPods: 6})
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[0], pods[1], pods[2])
	restarted := map[string]bool{}
	for len(restarted) < 3 {
		crr := f.waitRequests(1)[0] // never two at once
		if restarted[crr.Spec.PodName] {
			t.Fatalf("%s restarted twice", crr.Spec.PodName)
		}
		restarted[crr.Spec.PodName] = true
		if len(restarted) == 1 { // the other two wait for the budget, and say whose
			for _, p := range pods[:3] {
				if p.Name != crr.Spec.PodName {
					f.waitEvent(p, EventReasonHeld, "PodDisruptionBudget "+f.ns+"/paced")
				}
			}
		}
		f.complete(&crr, v1alpha1.ContainerRecreateRequestSucceeded)
		poll.Eventually(t, 10*time.Second, func() error {
			for _, r := range f.requests() {
				if r.Name == crr.Name {
					return fmt.Errorf("finished request %s not deleted yet", r.Name)
				}
			}
			return nil
		})
	}
}

// budget creates pdb with the status the disruption controller would write (current with its
// generation).
func (f *fixture) budget(pdb *policyv1.PodDisruptionBudget, st policyv1.PodDisruptionBudgetStatus) {
	f.t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, pdb); err != nil {
		f.t.Fatal(err)
	}
	st.ObservedGeneration = pdb.Generation
	pdb.Status = st
	if err := env.Client.Status().Update(ctx, pdb); err != nil {
		f.t.Fatal(err)
	}
}

// Two PodDisruptionBudgets over overlapping workloads, as the eviction API counts them: a pod
// both select is held (the eviction API refuses it); a pod one selects is judged by that
// budget's own pods, the other workload's included.
func TestOverlappingDisruptionBudgets(t *testing.T) {
	f := newFixture(t)
	stable := f.deployment("stable", 3, func(p *corev1.Pod) { p.Labels["tier"] = "front" })
	canary := f.deployment("canary", 1, func(p *corev1.Pod) { p.Labels["tier"] = "front" })
	all := append(slices.Clone(stable), canary...)
	front := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "front", Namespace: f.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}},
	}
	f.budget(front, policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 4, DesiredHealthy: 3, DisruptionsAllowed: 1, ExpectedPods: 4})
	canaryPDB := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "canary", Namespace: f.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "canary"}}},
	}
	f.budget(canaryPDB, policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 1, DesiredHealthy: 0, DisruptionsAllowed: 1, ExpectedPods: 1})

	// The canary pod: both budgets select it.
	f.setStates(all, v1alpha1.ProbeFailed, time.Now(), canary[0])
	f.waitEvent(canary[0], EventReasonHeld, "selected by 2 PodDisruptionBudgets ("+f.ns+"/canary, "+f.ns+"/front)")
	f.waitDecision(canary[0], corev1.ConditionFalse, ReasonMultipleBudgets)

	// A stable pod is front's alone. The canary is being recreated by someone else: it counts
	// against front (1 allowed) though it is not of the stable workload.
	manual := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: f.ns,
			Labels: map[string]string{v1alpha1.LabelCRRPodUID: string(canary[0].UID)}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: canary[0].Name,
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}}},
	}
	if err := env.Client.Create(context.Background(), manual); err != nil {
		t.Fatal(err)
	}
	f.setStates(all, v1alpha1.ProbeFailed, time.Now(), stable[0])
	f.waitEvent(stable[0], EventReasonHeld, "PodDisruptionBudget "+f.ns+"/front allows no more disruptions")
	f.complete(manual, v1alpha1.ContainerRecreateRequestSucceeded)
	poll.Eventually(t, 10*time.Second, func() error {
		for _, r := range f.requests() {
			if r.Spec.PodName != stable[0].Name {
				continue
			}
			// It says why, for the node service's Killing event: the budget that let it go.
			if why := r.Annotations[v1alpha1.AnnotationCRRReason]; !strings.HasPrefix(why, "failed liveness probe, will be restarted; decider: budget ok: PodDisruptionBudget "+f.ns+"/front allows 1 more") {
				t.Errorf("the request's reason: %q", why)
			}
			return nil
		}
		return fmt.Errorf("no request for %s after the canary's finished", stable[0].Name)
	})
	f.waitDecision(stable[0], corev1.ConditionTrue, ReasonLivenessFailed)
}

// A budget the disruption controller has not counted (its status behind its spec) allows
// nothing, as the eviction API answers; the decider says so and acts once it is counted.
func TestUncountedDisruptionBudgetHolds(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("uncounted", 4, nil)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "uncounted", Namespace: f.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "uncounted"}}},
	}
	if err := env.Client.Create(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[0])
	f.waitEvent(pods[0], EventReasonHeld, "has not counted it yet")
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests under an uncounted budget", n)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 4, DesiredHealthy: 3, DisruptionsAllowed: 1, ExpectedPods: 4}
	if err := env.Client.Status().Update(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	f.waitRequests(1)
}

// Pods being deleted are unavailable (a rolling update in progress): with the default budget of
// 1 in 4, a failing pod waits while an old pod terminates.
func TestTerminatingPodsUseTheBudget(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pods := f.deployment("rolling", 5, func(p *corev1.Pod) {
		if strings.HasSuffix(p.Name, "-4") {
			p.Finalizers = []string{"probeshim.io/test-hold"} // terminates until the test lets it go
		}
	})
	old := pods[4]
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	f.setStates(pods[:4], v1alpha1.ProbeFailed, time.Now(), pods[0])
	f.waitEvent(pods[0], EventReasonHeld, "terminating")
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests while a pod terminates", n)
	}
	cur := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), cur); err != nil {
		t.Fatal(err)
	}
	cur.Finalizers = nil
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// No kubelet here confirms the deletion: do it as it would.
	if err := env.Client.Delete(ctx, cur, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	f.waitRequests(1)
}

// OpenKruise's PodUnavailableBudget, served here as on a cluster with Kruise, is honoured like a
// PodDisruptionBudget: by its own status, its pods found through its target workload.
func TestPodUnavailableBudgetHolds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pods := f.deployment("kruised", 4, nil)
	pub := &kruiseapi.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "kruised", Namespace: f.ns},
		Spec: kruiseapi.PodUnavailableBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			TargetReference: &kruiseapi.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "kruised"}},
	}
	if err := env.Client.Create(ctx, pub); err != nil {
		t.Fatal(err)
	}
	// Kruise counted one pod unavailable elsewhere: nothing allowed.
	pub.Status = kruiseapi.PodUnavailableBudgetStatus{ObservedGeneration: pub.Generation, UnavailableAllowed: 0,
		CurrentAvailable: 3, DesiredAvailable: 3, TotalReplicas: 4}
	if err := env.Client.Status().Update(ctx, pub); err != nil {
		t.Fatal(err)
	}
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[0])
	f.waitEvent(pods[0], EventReasonHeld, "PodUnavailableBudget "+f.ns+"/kruised allows no more disruptions")
	pub.Status.UnavailableAllowed, pub.Status.CurrentAvailable = 1, 4
	if err := env.Client.Status().Update(ctx, pub); err != nil {
		t.Fatal(err)
	}
	f.waitRequests(1)
}

// Anyone's request makes its pod unavailable, whether or not the pod uses the enhanced liveness
// probe: with the default budget of 1 in 4, a failing pod waits while another pod of its
// workload is being recreated by someone else.
func TestOthersRequestUsesTheBudget(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("shared", 4, func(p *corev1.Pod) {
		if strings.HasSuffix(p.Name, "-0") {
			delete(p.Annotations, v1alpha1.AnnotationUsingEnhancedLiveness)
		}
	})
	manual := &v1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: f.ns,
			Labels: map[string]string{v1alpha1.LabelCRRPodUID: string(pods[0].UID)}},
		Spec: v1alpha1.ContainerRecreateRequestSpec{PodName: pods[0].Name,
			Containers: []v1alpha1.ContainerRecreateRequestContainer{{Name: "app"}}},
	}
	if err := env.Client.Create(context.Background(), manual); err != nil {
		t.Fatal(err)
	}
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[1])
	f.waitEvent(pods[1], EventReasonHeld, string(ReasonMaxUnavailable))
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests, want only the one made by hand", n)
	}
	f.complete(manual, v1alpha1.ContainerRecreateRequestSucceeded)
	poll.Eventually(t, 10*time.Second, func() error {
		for _, r := range f.requests() {
			if r.Spec.PodName == pods[1].Name {
				return nil
			}
		}
		return fmt.Errorf("no request for %s after the other one finished", pods[1].Name)
	})
}

func TestSwitchesHold(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("switched", 4, func(p *corev1.Pod) {
		if strings.HasSuffix(p.Name, "-0") {
			p.Annotations[AnnotationRestartDisabled] = "true"
		}
	})
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[0])
	f.waitEvent(pods[0], EventReasonHeld, string(ReasonPodOptedOut))
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests despite the pod's switch", n)
	}
	// Switch off the pod's switch: the restart goes ahead.
	cur := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pods[0]), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	delete(cur.Annotations, AnnotationRestartDisabled)
	if err := env.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
	f.waitRequests(1)
}

// The decider stopped after recording a decision and before creating its request: the next
// look at the pod creates it, under the recorded name, once the checks let it through. When one
// holds it then (here: the cluster-wide rate limit, drained by the tests before), the recorded
// restart is dropped and the failure decided anew: still exactly one request.
func TestRecordedButNotCreated(t *testing.T) {
	f := newFixture(t)
	since := time.Now().Truncate(time.Second)
	name := "lost-0-liveness-recorded"
	pods := f.deployment("lost", 4, nil)
	f.recordUnstarted(pods[0], name, since)
	f.setStates(pods, v1alpha1.ProbeFailed, since, pods[0])
	crr := f.waitRequests(1)[0]
	if crr.Spec.PodName != pods[0].Name {
		t.Fatalf("restarted %s, want %s", crr.Spec.PodName, pods[0].Name)
	}
	if crr.Name != name {
		f.waitEvent(pods[0], EventReasonHeld, "") // what held the recorded one
		t.Logf("the recorded restart was held, then decided anew as %s", crr.Name)
	}
	poll.Consistently(t, time.Second, func() error {
		if n := len(f.requests()); n != 1 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
}

// recordUnstarted writes a record on pod, as the decider does, of a restart of container app at
// failure since under request name, decided now and never created.
func (f *fixture) recordUnstarted(pod *corev1.Pod, name string, since time.Time) {
	f.t.Helper()
	decided := metav1.NewMicroTime(time.Now())
	rec := Record{Request: name, Requested: &decided,
		Containers: map[string]ContainerRecord{"app": {Failure: metav1.NewTime(since), Restarts: 1, LastRestart: decided}}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationRestarts, rec.format())
	if err := env.Client.Patch(context.Background(), pod.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		f.t.Fatal(err)
	}
}

// A request that could not restart the container: the failure is decided again, after the
// backoff.
func TestFailedRequestIsRetried(t *testing.T) {
	f := newFixture(t)
	pods := f.deployment("retry", 4, nil)
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[1])
	first := f.waitRequests(1)[0]
	f.complete(&first, v1alpha1.ContainerRecreateRequestFailed)
	f.waitEvent(pods[1], EventReasonRestartFailed, first.Name)
	poll.Eventually(t, 10*time.Second, func() error {
		for _, r := range f.requests() {
			if r.Name == first.Name {
				return fmt.Errorf("failed request %s still there", r.Name)
			}
			if r.Spec.PodName == pods[1].Name {
				return nil // the retry, a new attempt under a new name
			}
		}
		return fmt.Errorf("no retry yet")
	})
}

func TestConfigAppliesAtRunTime(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	setDoc := func(doc string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: configNamespace, Name: ConfigMapName}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data = map[string]string{ConfigKey: doc}
		if err := env.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { setDoc("backoff: {initial: 1s, max: 4s}") })

	setDoc("enabled: false\nbackoff: {initial: 1s, max: 4s}")
	pods := f.deployment("cfg", 4, nil)
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[3])
	f.waitEvent(pods[3], EventReasonHeld, string(ReasonDisabled))

	setDoc("enabeld: true") // a typo holds everything, and says so
	f.waitEvent(pods[3], EventReasonHeld, string(ReasonConfigInvalid))

	setDoc("dryRun: true")
	f.waitEvent(pods[3], EventReasonDryRun, "container app")
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests in dry run", n)
	}

	setDoc("blacklist: {workloads: [Deployment/" + f.ns + "/cfg]}")
	f.waitEvent(pods[3], EventReasonHeld, string(ReasonBlacklisted))

	setDoc("enabled: true")
	f.waitRequests(1)
}

// A record naming a request the decider never created (as a forged one would, or one written just
// before the pod's switch was turned on) creates nothing while a protection holds: the follow-up
// passes the same checks as any restart, and the held restart is dropped from the record.
func TestRecordedRestartPassesTheChecks(t *testing.T) {
	f := newFixture(t)
	since := time.Now().Truncate(time.Second)
	pods := f.deployment("forged", 4, func(p *corev1.Pod) {
		if strings.HasSuffix(p.Name, "-0") {
			p.Annotations[AnnotationRestartDisabled] = "true"
		}
	})
	f.recordUnstarted(pods[0], "forged-0-liveness-recorded", since)
	f.setStates(pods, v1alpha1.ProbeFailed, since, pods[0])
	f.waitEvent(pods[0], EventReasonHeld, string(ReasonPodOptedOut))
	poll.Eventually(t, 10*time.Second, func() error {
		if r := f.record(pods[0]); r.Request != "" {
			return fmt.Errorf("record still names request %s", r.Request)
		}
		return nil
	})
	poll.Consistently(t, 1500*time.Millisecond, func() error {
		if n := len(f.requests()); n != 0 {
			return fmt.Errorf("%d requests despite the pod's switch", n)
		}
		return nil
	})
}

// Deleting the ConfigMap after it was read holds every restart (it never falls back to the
// defaults, which would switch restarts back on); restoring it lets them go ahead.
func TestConfigMapDeletedHoldsRestarts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const doc = "backoff: {initial: 1s, max: 4s}"
	restore := func() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: configNamespace},
			Data: map[string]string{ConfigKey: doc}}
		if err := env.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(restore)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: configNamespace}}
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	pods := f.deployment("nocfg", 4, nil)
	f.setStates(pods, v1alpha1.ProbeFailed, time.Now(), pods[1])
	f.waitEvent(pods[1], EventReasonHeld, "was deleted after it was read")
	poll.Consistently(t, time.Second, func() error {
		if n := len(f.requests()); n != 0 {
			return fmt.Errorf("%d requests without a configuration", n)
		}
		return nil
	})
	restore()
	f.waitRequests(1)
}
