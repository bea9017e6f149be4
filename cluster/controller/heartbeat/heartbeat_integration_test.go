// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package heartbeat_test

// The heartbeat against a real API server with the controllers that act on it: the pod status
// controller and the liveness decider. The test plays the node services: it renews their Leases
// and writes their NodePodProbe status. The grace is 2s, so a silence shows within seconds.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/controller/podstatus"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

const (
	grace           = 2 * time.Second
	configNamespace = "probeshim-system"
)

var (
	env        *testenv.Env
	skipReason string
	registry   = prometheus.NewRegistry()
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error {
		c, err := client.New(mgr.GetConfig(), client.Options{})
		if err != nil {
			return err
		}
		ctx := context.Background()
		for _, ns := range []string{heartbeat.LeaseNamespace, configNamespace} {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
		}
		// No observation window: a failure is decided at once.
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: decider.ConfigMapName, Namespace: configNamespace},
			Data: map[string]string{decider.ConfigKey: "circuitBreaker: {window: 0s}"}}); err != nil {
			return err
		}
		if err := heartbeat.SetupWithManager(mgr, heartbeat.Options{Grace: grace, Registry: registry}); err != nil {
			return err
		}
		if err := podstatus.SetupWithManager(mgr); err != nil {
			return err
		}
		return decider.SetupWithManager(mgr, decider.Options{Namespace: configNamespace})
	}, &env, &skipReason)
}

// renew writes node's Lease as its node service does, renewed at at.
func renew(t testing.TB, node string, at time.Time) {
	t.Helper()
	if err := renewLease(node, at); err != nil {
		t.Fatal(err)
	}
}

// renewLease renews node's Lease as a node service does: read, then write. A test's own write of
// the Lease between the two (an annotation patch) is a conflict, read again, as the service would at
// its next renewal.
func renewLease(node string, at time.Time) error {
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease := &coordinationv1.Lease{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: heartbeat.LeaseNamespace, Name: node}, lease)
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), LeaseDurationSeconds: ptr.To(int32(40)),
			RenewTime: ptr.To(metav1.NewMicroTime(at))}
		switch {
		case apierrors.IsNotFound(err):
			lease.ObjectMeta = metav1.ObjectMeta{Namespace: heartbeat.LeaseNamespace, Name: node}
			return env.Client.Create(ctx, lease)
		case err == nil:
			return env.Client.Update(ctx, lease)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("renewing the Lease of %s: %w", node, err)
	}
	return nil
}

// nodeService renews node's Lease every 200ms, like a healthy node service (every 10s, grace 40s).
type nodeService struct {
	t    testing.TB
	node string
	mu   sync.Mutex
	last time.Time
	stop chan struct{}
	done chan struct{}
}

func startNodeService(t testing.TB, node string) *nodeService {
	s := &nodeService{t: t, node: node}
	s.start()
	t.Cleanup(func() { s.halt() })
	return s
}

func (s *nodeService) start() {
	renew(s.t, s.node, time.Now())
	s.last = time.Now()
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				now := time.Now()
				if err := renewLease(s.node, now); err != nil {
					s.t.Error(err)
					return
				}
				s.mu.Lock()
				s.last = now
				s.mu.Unlock()
			}
		}
	}()
}

// halt stops renewing and returns the last renewal.
func (s *nodeService) halt() time.Time {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// silentGauge is probeshim_node_service_silent{node}, or -1 without a series.
func silentGauge(t testing.TB, node string) float64 {
	t.Helper()
	mfs, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "probeshim_node_service_silent" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node" && l.GetValue() == node {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func waitGauge(t testing.TB, node string, want float64) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, func() error {
		if got := silentGauge(t, node); got != want {
			return fmt.Errorf("probeshim_node_service_silent{node=%q} = %v, want %v", node, got, want)
		}
		return nil
	})
}

// nodePodProbe creates node's NodePodProbe with the marker probes of pods and their states.
func nodePodProbe(t testing.TB, node string, pods []*corev1.Pod, probes []string, state v1alpha1.ProbeState) {
	t.Helper()
	ctx := context.Background()
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for _, p := range pods {
		pp := v1alpha1.PodProbe{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), IP: "10.0.0.1"}
		for _, name := range probes {
			pp.Probes = append(pp.Probes, v1alpha1.ContainerProbe{Name: name, ContainerName: "main",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}}})
		}
		npp.Spec.PodProbes = append(npp.Spec.PodProbes, pp)
	}
	if err := env.Client.Create(ctx, npp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), npp) })
	setStates(t, npp, pods, probes, state)
}

func setStates(t testing.TB, npp *v1alpha1.NodePodProbe, pods []*corev1.Pod, probes []string, state v1alpha1.ProbeState) {
	t.Helper()
	now := metav1.Now()
	var statuses []v1alpha1.PodProbeStatus
	for _, p := range pods {
		ps := v1alpha1.PodProbeStatus{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)}
		for _, name := range probes {
			ps.ProbeStates = append(ps.ProbeStates, v1alpha1.ContainerProbeState{Name: name, State: state,
				LastProbeTime: now, LastTransitionTime: now})
		}
		statuses = append(statuses, ps)
	}
	writeStatus(t, npp.Name, func(st *v1alpha1.NodePodProbeStatus) { st.PodProbeStatuses = statuses })
}

// writeStatus edits the status of node's NodePodProbe, as its node service does; the heartbeat
// controller may write the object's metadata in between.
func writeStatus(t testing.TB, node string, edit func(*v1alpha1.NodePodProbeStatus)) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		npp := &v1alpha1.NodePodProbe{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, npp); err != nil {
			return err
		}
		edit(&npp.Status)
		return env.Client.Status().Update(ctx, npp)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// marker creates a PodProbeMarker with probe "idle": condition condType, label label=true while
// Succeeded.
func marker(t testing.TB, ns, name, condType, label string, annotations map[string]string) {
	t.Helper()
	m := &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "idle", ContainerName: "main", PodConditionType: condType,
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{label: "true"}}}}},
		},
	}
	if err := env.Client.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func gamePods(t testing.TB, ns, node string, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, env.RunningPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("game-%d", i), Labels: map[string]string{"app": "game"}},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "game"}}},
		}, "10.0.0.1"))
	}
	return pods
}

func getPod(t testing.TB, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	cur := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

func condition(p *corev1.Pod, t string) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// waitPod waits until check passes on the pod.
func waitPod(t testing.TB, p *corev1.Pod, check func(*corev1.Pod) error) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, func() error { return check(getPod(t, p)) })
}

func waitEvent(t testing.TB, ns, pod, reason, text string) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != pod {
				continue
			}
			if e.Reason == reason && strings.Contains(e.Note, text) {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return fmt.Errorf("no %s event with %q on %s; seen %q", reason, text, pod, seen)
	})
}

func nppState(t testing.TB, node string) (string, string) {
	t.Helper()
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, npp); err != nil {
		t.Fatal(err)
	}
	return npp.Annotations[v1alpha1.AnnotationNodeService], npp.Annotations[v1alpha1.AnnotationNodeServiceSince]
}

func waitNPPState(t testing.TB, node, want string) string {
	t.Helper()
	var since string
	poll.Eventually(t, 10*time.Second, func() error {
		var got string
		if got, since = nppState(t, node); got != want {
			return fmt.Errorf("NodePodProbe %s: node service %q, want %q", node, got, want)
		}
		return nil
	})
	return since
}

// A node service that stops renewing: after the grace its pods' marker conditions are Unknown
// with why and since when, the marks go (or stay, for a marker that keeps them), an event on the
// pod says so, the metric and the NodePodProbe show it. Renewed again, the results flow as
// before, with one write per pod and kind of change.
func TestSilentNodeService(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true).Name
	svc := startNodeService(t, node)
	marker(t, ns, "removes", "example.com/idle", "idle", nil)
	marker(t, ns, "keeps", "example.com/kept", "kept", map[string]string{v1alpha1.AnnotationOnNodeServiceSilent: v1alpha1.OnSilentKeepMarks})
	pods := gamePods(t, ns, node, 1)
	probes := []string{"removes#idle", "keeps#idle"}
	nodePodProbe(t, node, pods, probes, v1alpha1.ProbeSucceeded)

	current := func(p *corev1.Pod) error {
		for _, c := range []string{"example.com/idle", "example.com/kept"} {
			if cond := condition(p, c); cond == nil || cond.Status != corev1.ConditionTrue || cond.Message != "" {
				return fmt.Errorf("condition %s: %+v", c, cond)
			}
		}
		if p.Labels["idle"] != "true" || p.Labels["kept"] != "true" {
			return fmt.Errorf("labels %v", p.Labels)
		}
		return nil
	}
	waitPod(t, pods[0], current)
	waitNPPState(t, node, v1alpha1.NodeServiceLive)
	waitGauge(t, node, 0)

	mark := env.Writes.Len()
	last := svc.halt()
	stopped := time.Now()
	want := "the probeshim node service on node " + node + " is silent since " + last.UTC().Format(time.RFC3339)
	waitPod(t, pods[0], func(p *corev1.Pod) error {
		for _, c := range []string{"example.com/idle", "example.com/kept"} {
			if cond := condition(p, c); cond == nil || cond.Status != corev1.ConditionUnknown || !strings.HasPrefix(cond.Message, want) ||
				!strings.HasSuffix(cond.Message, "last result Succeeded") {
				return fmt.Errorf("condition %s: %+v", c, cond)
			}
		}
		if _, ok := p.Labels["idle"]; ok {
			return fmt.Errorf("label idle kept by a marker that removes marks: %v", p.Labels)
		}
		if p.Labels["kept"] != "true" {
			return fmt.Errorf("label kept removed by a marker that keeps marks: %v", p.Labels)
		}
		return nil
	})
	if d := time.Since(stopped); d < grace-time.Second {
		t.Errorf("Unknown %s after the last renewal, before the grace of %s", d, grace)
	}
	if since := waitNPPState(t, node, v1alpha1.NodeServiceSilent); since != last.UTC().Format(time.RFC3339) {
		t.Errorf("NodePodProbe silent since %s, want the last renewal %s", since, last.UTC().Format(time.RFC3339))
	}
	waitGauge(t, node, 1)
	waitEvent(t, ns, pods[0].Name, heartbeat.EventReasonSilent, want)

	// The transition is recorded once (one reconcile per node, whichever object woke it).
	if n := nppWrites(mark, node); n != 1 {
		t.Errorf("%d writes to the NodePodProbe for one transition, want 1", n)
	}
	// While silent, nothing more is written to the pod.
	mark = env.Writes.Len()
	poll.Consistently(t, time.Second, func() error { return podWrites(mark, ns) })

	// A marker changing its mind while the node is silent applies at once: its marks come back.
	m := &v1alpha1.PodProbeMarker{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "removes"}, m); err != nil {
		t.Fatal(err)
	}
	m.Annotations = map[string]string{v1alpha1.AnnotationOnNodeServiceSilent: v1alpha1.OnSilentKeepMarks}
	if err := env.Client.Update(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	waitPod(t, pods[0], func(p *corev1.Pod) error {
		if p.Labels["idle"] != "true" {
			return fmt.Errorf("labels %v, want idle=true kept", p.Labels)
		}
		return nil
	})

	svc.start()
	mark = env.Writes.Len()
	waitPod(t, pods[0], current)
	waitNPPState(t, node, v1alpha1.NodeServiceLive)
	waitGauge(t, node, 0)
	waitEvent(t, ns, pods[0].Name, heartbeat.EventReasonResumed, "renews its heartbeat again")
	// One metadata patch (label and record) and one status patch (conditions).
	var writes []string
	for _, w := range env.Writes.Since(mark) {
		if w.Namespace == ns {
			writes = append(writes, w.Verb+" "+w.Kind+"/"+w.Name+" "+w.Subresource)
		}
	}
	if len(writes) > 2 {
		t.Errorf("recovery wrote %d times to the pod: %q", len(writes), writes)
	}
}

func nppWrites(mark int, node string) int {
	n := 0
	for _, w := range env.Writes.Since(mark) {
		if w.Kind == "NodePodProbe" && w.Name == node {
			n++
		}
	}
	return n
}

// podWrites fails when the manager wrote to a pod of ns since mark.
func podWrites(mark int, ns string) error {
	for _, w := range env.Writes.Since(mark) {
		if w.Namespace == ns {
			return fmt.Errorf("wrote %s %s/%s %s while nothing changed", w.Verb, w.Kind, w.Name, w.Subresource)
		}
	}
	return nil
}

// A node with results that never renewed a Lease (the kubelet's identity, an older node service)
// keeps NoLease past the grace: its results count as they are.
func TestMissingLease(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	withResults := env.Node(t, true).Name
	marker(t, ns, "keeps", "example.com/idle", "idle", nil)
	pods := gamePods(t, ns, withResults, 1)
	nodePodProbe(t, withResults, pods, []string{"keeps#idle"}, v1alpha1.ProbeSucceeded)
	waitNPPState(t, withResults, v1alpha1.NodeServiceNoLease)
	waitGauge(t, withResults, 0)
	// Through the grace and a second past it: still NoLease. Then the record wiped so that the
	// controller looks again: still NoLease, and the result stands.
	poll.Consistently(t, grace+time.Second, func() error {
		if got, _ := nppState(t, withResults); got != v1alpha1.NodeServiceNoLease {
			return fmt.Errorf("NodePodProbe %s: node service %q within the grace, want %q", withResults, got, v1alpha1.NodeServiceNoLease)
		}
		if got := silentGauge(t, withResults); got != 0 {
			return fmt.Errorf("probeshim_node_service_silent{node=%q} = %v within the grace, want 0", withResults, got)
		}
		return nil
	})
	wipe := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationNodeService + `":null}}}`)
	if err := env.Client.Patch(context.Background(), &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: withResults}},
		client.RawPatch(types.MergePatchType, wipe)); err != nil {
		t.Fatal(err)
	}
	waitNPPState(t, withResults, v1alpha1.NodeServiceNoLease)
	waitGauge(t, withResults, 0)
	waitPod(t, pods[0], func(p *corev1.Pod) error {
		if c := condition(p, "example.com/idle"); c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("condition example.com/idle: %+v, want True", c)
		}
		return nil
	})
	if cells := printed(t, withResults); cells["Node-Service"] != v1alpha1.NodeServiceNoLease {
		t.Errorf("kubectl get npp %s shows %v", withResults, cells)
	}
}

// A Lease that goes away (deleted by hand) from a node known to renew one has a grace to come back,
// like one that is not renewed; then the node is silent.
func TestDeletedLeaseHasAGrace(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true).Name
	svc := startNodeService(t, node)
	marker(t, ns, "removes", "example.com/idle", "idle", nil)
	nodePodProbe(t, node, gamePods(t, ns, node, 1), []string{"removes#idle"}, v1alpha1.ProbeSucceeded)
	waitNPPState(t, node, v1alpha1.NodeServiceLive)
	svc.halt()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: heartbeat.LeaseNamespace, Name: node}}
	if err := env.Client.Delete(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	waitNPPState(t, node, v1alpha1.NodeServiceSilent)
	waitGauge(t, node, 1)
	if d := time.Since(deleted); d < grace-time.Second {
		t.Errorf("silent %s after the Lease was deleted, before the grace of %s", d, grace)
	}
}

// A deleted node's Lease is deleted, with or without an owner reference (no garbage collector
// runs here), and its metric series goes.
func TestDeletedNodeLosesItsLease(t *testing.T) {
	testenv.Require(t, env, skipReason)
	node := env.Node(t, true)
	svc := startNodeService(t, node.Name)
	waitGauge(t, node.Name, 0)
	svc.halt()
	if err := env.Client.Delete(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, func() error {
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: heartbeat.LeaseNamespace, Name: node.Name}, &coordinationv1.Lease{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Lease of deleted node %s: %w", node.Name, err)
		}
		return nil
	})
	waitGauge(t, node.Name, -1)
}

// The decider holds restarts on a node whose node service is silent, acts on the others, and
// its circuit breaker counts only pods with current results: here 1 failing of 2 on the live
// node (closed), where counting the silent node's 2 failing pods would make 3 of 4 (open).
func TestDeciderHoldsOnSilentNode(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ctx := context.Background()
	ns := env.Namespace(t)
	live, silent := env.Node(t, true).Name, env.Node(t, true).Name
	startNodeService(t, live)
	renew(t, silent, time.Now().Add(-time.Minute))
	for _, n := range []string{live, silent} {
		nodePodProbe(t, n, nil, nil, v1alpha1.ProbeSucceeded)
	}
	waitNPPState(t, silent, v1alpha1.NodeServiceSilent)

	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-rs", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deployment-web", Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web"}}}}},
	}
	if err := env.Client.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	pod := func(name, node string) *corev1.Pod {
		p := env.RunningPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name,
					UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "web"}}},
		}, "10.0.0.2")
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "web", Ready: true,
			ContainerID: "containerd://" + string(p.UID),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}}}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a0, a1 := pod("web-a0", live), pod("web-a1", live)
	b0, b1 := pod("web-b0", silent), pod("web-b1", silent)
	failed := time.Now().Add(-time.Second).Truncate(time.Second)
	liveness := func(node string, states map[*corev1.Pod]v1alpha1.ProbeState) {
		writeStatus(t, node, func(status *v1alpha1.NodePodProbeStatus) {
			status.PodProbeStatuses = nil
			for p, st := range states {
				status.PodProbeStatuses = append(status.PodProbeStatuses, v1alpha1.PodProbeStatus{
					Name: p.Name, Namespace: p.Namespace, UID: string(p.UID),
					ProbeStates: []v1alpha1.ContainerProbeState{{Name: v1alpha1.LivenessProbeName("app"), State: st,
						LastProbeTime: metav1.Now(), LastTransitionTime: metav1.NewTime(failed)}}})
			}
		})
	}
	liveness(silent, map[*corev1.Pod]v1alpha1.ProbeState{b0: v1alpha1.ProbeFailed, b1: v1alpha1.ProbeFailed})
	liveness(live, map[*corev1.Pod]v1alpha1.ProbeState{a0: v1alpha1.ProbeFailed, a1: v1alpha1.ProbeSucceeded})

	requests := func() []v1alpha1.ContainerRecreateRequest {
		var list v1alpha1.ContainerRecreateRequestList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	poll.Eventually(t, 10*time.Second, func() error {
		if got := requests(); len(got) != 1 || got[0].Spec.PodName != a0.Name {
			return fmt.Errorf("requests %v, want one for %s", got, a0.Name)
		}
		return nil
	})
	for _, p := range []*corev1.Pod{b0, b1} {
		waitEvent(t, ns, p.Name, decider.EventReasonHeld, "(NodeServiceSilent): the probeshim node service on node "+silent+" is silent since")
	}
	poll.Consistently(t, time.Second, func() error {
		if got := requests(); len(got) != 1 {
			return fmt.Errorf("%d requests, want only the live node's", len(got))
		}
		return nil
	})
}

// printed is what `kubectl get npp <node>` shows, by column.
func printed(t *testing.T, node string) map[string]string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.RESTClient().Get().AbsPath("/apis/apps.kruise.io/v1alpha1/nodepodprobes", node).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows", len(table.Rows))
	}
	out := map[string]string{}
	for i, col := range table.ColumnDefinitions {
		out[col.Name] = fmt.Sprint(table.Rows[0].Cells[i])
	}
	return out
}

// The Lease's probes-late note (a live node whose probes run behind) reaches the node's
// NodePodProbe, bounded, and goes with it; a silent node's note goes with its liveness.
func TestProbesLateReachesNodePodProbe(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true).Name
	svc := startNodeService(t, node)
	marker(t, ns, "late", "example.com/idle", "idle", nil)
	nodePodProbe(t, node, gamePods(t, ns, node, 1), []string{"late#idle"}, v1alpha1.ProbeSucceeded)
	waitNPPState(t, node, v1alpha1.NodeServiceLive)

	setNote := func(note any) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationProbesLate: note}}})
		if err := env.Client.Patch(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: heartbeat.LeaseNamespace, Name: node}},
			client.RawPatch(types.MergePatchType, body)); err != nil {
			t.Fatal(err)
		}
	}
	waitNote := func(want func(string, bool) error) {
		t.Helper()
		poll.Eventually(t, 10*time.Second, func() error {
			npp := &v1alpha1.NodePodProbe{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, npp); err != nil {
				return err
			}
			v, ok := npp.Annotations[v1alpha1.AnnotationProbesLate]
			return want(v, ok)
		})
	}
	note := "exec probes start late: " + strings.Repeat("x", 2000) // the node bounds it; so does this
	setNote(note)
	waitNote(func(v string, ok bool) error {
		if !strings.HasPrefix(v, "exec probes start late: ") || len(v) > v1alpha1.MaxProbesLateBytes {
			return fmt.Errorf("NodePodProbe %s: probes-late %q (%d bytes), want the note within %d bytes", node, v, len(v), v1alpha1.MaxProbesLateBytes)
		}
		return nil
	})
	gone := func(v string, ok bool) error {
		if ok {
			return fmt.Errorf("NodePodProbe %s: probes-late %q, want none", node, v)
		}
		return nil
	}
	setNote(nil)
	waitNote(gone)

	setNote("network probes start late")
	waitNote(func(v string, ok bool) error {
		if v != "network probes start late" {
			return fmt.Errorf("NodePodProbe %s: probes-late %q", node, v)
		}
		return nil
	})
	svc.halt()
	waitNPPState(t, node, v1alpha1.NodeServiceSilent)
	waitNote(gone)
}

// waitServed waits until node carries the served label, or does not.
func waitServed(t testing.TB, node string, want bool) {
	t.Helper()
	poll.Eventually(t, 10*time.Second, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if v, ok := n.Labels[v1alpha1.LabelNodeServed]; ok != want || (want && v != "true") {
			return fmt.Errorf("node %s labels %v, want %s: %v", node, n.Labels, v1alpha1.LabelNodeServed, want)
		}
		return nil
	})
}

// A node carries the served label while its node service renews its Lease: none before the first
// renewal, set within moments of it, put back when someone removes it, removed once the Lease is
// older than the grace, and set again when the service comes back.
func TestServedLabel(t *testing.T) {
	testenv.Require(t, env, skipReason)
	node := env.Node(t, true).Name
	served := func(want bool) { t.Helper(); waitServed(t, node, want) }
	poll.Consistently(t, time.Second, func() error {
		n := &corev1.Node{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if _, ok := n.Labels[v1alpha1.LabelNodeServed]; ok {
			return fmt.Errorf("node %s is labelled served without a node service", node)
		}
		return nil
	})
	svc := startNodeService(t, node)
	served(true)

	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+v1alpha1.LabelNodeServed+`":null}}}`))
	if err := env.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, patch); err != nil {
		t.Fatal(err)
	}
	served(true)

	svc.halt()
	served(false)
	svc.start()
	served(true)
}

// A pod whose enhanced liveness requires a served node and that the scheduler could not place is
// told why: that no node is served, and once one is, that none of the served ones can take it. A
// pod that turned the requirement off is told nothing.
func TestPendingPodToldWhy(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	ctx := context.Background()
	waiting := func(name, policy string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			v1alpha1.AnnotationUsingEnhancedLiveness: "true", v1alpha1.AnnotationServedNodeAffinity: policy,
			v1alpha1.AnnotationContainerProbeContext: `[{"name":"main","livenessProbe":{"tcpSocket":{"port":80}}}]`}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "game"}}}}
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	// What the scheduler writes when no node fits.
	unschedulable := func(pod *corev1.Pod, msg string) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getPod(t, pod)
			cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: metav1.Now()}}
			return env.Client.Status().Update(ctx, cur)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	required, off := waiting("requires", v1alpha1.ServedNodeRequire), waiting("off", v1alpha1.ServedNodeOff)
	unschedulable(required, "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")
	unschedulable(off, "0/3 nodes are available: 3 Insufficient cpu.")
	waitEvent(t, ns, "requires", heartbeat.EventReasonNoServedNode, "no node has a live probeshim node service (label node-restriction.kubernetes.io/probeshim-served=true)")

	node := env.Node(t, true).Name
	startNodeService(t, node)
	waitServed(t, node, true) // the scheduler tries again when a node's labels change
	unschedulable(required, "0/4 nodes are available: 1 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector.")
	waitEvent(t, ns, "requires", heartbeat.EventReasonNoServedNode, "nodes with a live probeshim node service (label node-restriction.kubernetes.io/probeshim-served=true) can take the pod")

	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == "off" && e.Reason == heartbeat.EventReasonNoServedNode {
			t.Errorf("the pod that turned the requirement off was told: %s", e.Note)
		}
	}
}
