// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nodepodprobe

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

var (
	env        *testenv.Env
	skipReason string
)

const wait = 10 * time.Second

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error { return SetupWithManager(mgr) }, &env, &skipReason)
}

var ctx = context.Background()

func newPod(ns, name, node string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "main", Image: "busybox",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "game", ContainerPort: 7777}},
		}}},
	}
}

func newMarker(ns, name string, sel map[string]string, probes ...v1alpha1.PodContainerProbe) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Probes: probes},
	}
}

func tcpProbe(name, port string) v1alpha1.PodContainerProbe {
	return v1alpha1.PodContainerProbe{Name: name, ContainerName: "main", PodConditionType: "game.io/" + name,
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(port)}}}}}
}

// spec renders a node's NodePodProbe spec as "ns/pod(uid-suffix)@IP:probe,probe ..." with the
// pod UIDs replaced by the pod name, or an error if it does not exist.
func spec(node string) (string, error) {
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, npp); err != nil {
		return "", err
	}
	var parts []string
	for _, pp := range npp.Spec.PodProbes {
		var ps []string
		for _, p := range pp.Probes {
			ps = append(ps, p.Name)
		}
		parts = append(parts, fmt.Sprintf("%s@%s:%s", pp.Name, pp.IP, strings.Join(ps, ",")))
	}
	return strings.Join(parts, " "), nil
}

func specIs(node, want string) func() error {
	return func() error {
		got, err := spec(node)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("NodePodProbe %s spec = %q, want %q", node, got, want)
		}
		return nil
	}
}

func getNPP(t *testing.T, node string) *v1alpha1.NodePodProbe {
	t.Helper()
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, npp); err != nil {
		t.Fatal(err)
	}
	return npp
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func TestNodePodProbeFollowsNode(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ready := env.Node(t, true)
	poll.Eventually(t, wait, specIs(ready.Name, ""))
	npp := getNPP(t, ready.Name)
	if len(npp.OwnerReferences) != 1 || npp.OwnerReferences[0].Kind != "Node" || npp.OwnerReferences[0].UID != ready.UID {
		t.Fatalf("owner references = %+v, want the Node", npp.OwnerReferences)
	}

	notReady := env.Node(t, false)
	poll.Consistently(t, 500*time.Millisecond, func() error {
		if _, err := spec(notReady.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodePodProbe of a node that is not Ready: %w", err)
		}
		return nil
	})
	env.SetNodeReady(t, notReady, true)
	poll.Eventually(t, wait, specIs(notReady.Name, ""))
	// Going NotReady again keeps it: a flapping node must not lose its probes.
	env.SetNodeReady(t, notReady, false)
	poll.Consistently(t, 300*time.Millisecond, specIs(notReady.Name, ""))

	if err := env.Client.Delete(ctx, ready); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, func() error {
		if _, err := spec(ready.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodePodProbe of a deleted node still there (%w)", err)
		}
		return nil
	})
}

func TestMarkerPlacesProbesOnTheRightNodes(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	n1, n2 := env.Node(t, true), env.Node(t, true)
	web := map[string]string{"app": "web"}
	env.RunningPod(t, newPod(ns, "a", n1.Name, web), "10.1.0.1")
	env.RunningPod(t, newPod(ns, "b", n2.Name, web), "10.2.0.1")
	env.RunningPod(t, newPod(ns, "db", n1.Name, map[string]string{"app": "db"}), "10.1.0.2")
	create(t, newPod(ns, "pending", n1.Name, web)) // no status: not initialised, no IP

	http := v1alpha1.PodContainerProbe{Name: "http", ContainerName: "main", PodConditionType: "game.io/http",
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}}}}
	m := newMarker(ns, "game", web, http, tcpProbe("tcp", "game"))
	create(t, m)

	poll.Eventually(t, wait, specIs(n1.Name, "a@10.1.0.1:game#http,game#tcp"))
	poll.Eventually(t, wait, specIs(n2.Name, "b@10.2.0.1:game#http,game#tcp"))
	npp := getNPP(t, n1.Name)
	pp := npp.Spec.PodProbes[0]
	a := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	if pp.Namespace != ns || pp.UID != string(a.UID) {
		t.Fatalf("entry identity = %s/%s %s, want %s/a %s", pp.Namespace, pp.Name, pp.UID, ns, a.UID)
	}
	if p := pp.Probes[0].Probe.HTTPGet; p.Port != intstr.FromInt32(8080) || p.Path != "/healthz" {
		t.Errorf("http probe = %+v, want port 8080 /healthz", p)
	}
	if p := pp.Probes[1].Probe.TCPSocket; p.Port != intstr.FromInt32(7777) {
		t.Errorf("tcp probe port = %v, want 7777", p.Port)
	}

	// Status: both probeable pods matched, this generation placed.
	poll.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if m.Status.ObservedGeneration != m.Generation || m.Status.MatchedPods != 2 {
			return fmt.Errorf("status = %+v, generation %d; want matchedPods 2 and observed", m.Status, m.Generation)
		}
		return nil
	})

	// The pending pod starts: it gets its entry, and is counted.
	pending := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pending"}, pending); err != nil {
		t.Fatal(err)
	}
	pending.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.3", Conditions: []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}}
	if err := env.Client.Status().Update(ctx, pending); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(n1.Name, "a@10.1.0.1:game#http,game#tcp pending@10.1.0.3:game#http,game#tcp"))
	poll.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if m.Status.MatchedPods != 3 {
			return fmt.Errorf("matchedPods = %d, want 3", m.Status.MatchedPods)
		}
		return nil
	})

	// A label change that ends the match removes the pod's entries.
	db := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, db); err != nil {
		t.Fatal(err)
	}
	db.Labels = map[string]string{"app": "other"}
	if err := env.Client.Update(ctx, db); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(n1.Name, "pending@10.1.0.3:game#http,game#tcp"))
}

func TestProbeRemovalRemovesExactlyItsEntries(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	web := map[string]string{"app": "web"}
	env.RunningPod(t, newPod(ns, "a", node.Name, web), "10.3.0.1")
	// "m" and "m1" share a prefix: removing m's probes must not touch m1's (no substring match).
	m := newMarker(ns, "m", web, tcpProbe("idle", "game"), tcpProbe("busy", "game"))
	m1 := newMarker(ns, "m1", web, tcpProbe("idle", "game"))
	create(t, m)
	create(t, m1)
	poll.Eventually(t, wait, specIs(node.Name, "a@10.3.0.1:m#busy,m#idle,m1#idle"))

	// An enhanced-liveness entry in the same spec, as the liveness mapping writes it.
	npp := getNPP(t, node.Name)
	npp.Spec.PodProbes[0].Probes = append(npp.Spec.PodProbes[0].Probes, v1alpha1.ContainerProbe{
		Name: v1alpha1.LivenessProbeName("main"), ContainerName: "main",
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(7777)}}}}})
	if err := env.Client.Update(ctx, npp); err != nil {
		t.Fatal(err)
	}

	// The controller writes the marker's status meanwhile: a conflict is read again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		m.Spec.Probes = m.Spec.Probes[:1] // drop "busy"
		return env.Client.Update(ctx, m)
	}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(node.Name, "a@10.3.0.1:m#idle,m1#idle,main-livenessProbe"))
	poll.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if m.Status.ObservedGeneration != m.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", m.Status.ObservedGeneration, m.Generation)
		}
		return nil
	})

	if err := env.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(node.Name, "a@10.3.0.1:m1#idle,main-livenessProbe"))
	if err := env.Client.Delete(ctx, m1); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(node.Name, "a@10.3.0.1:main-livenessProbe"))
}

func TestTwoMarkersOnOneContainer(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	web := map[string]string{"app": "web"}
	env.RunningPod(t, newPod(ns, "a", node.Name, web), "10.4.0.1")
	create(t, newMarker(ns, "idle", web, tcpProbe("check", "game")))
	create(t, newMarker(ns, "ready", web, tcpProbe("check", "http")))
	poll.Eventually(t, wait, specIs(node.Name, "a@10.4.0.1:idle#check,ready#check"))
	npp := getNPP(t, node.Name)
	ports := map[string]int32{}
	for _, p := range npp.Spec.PodProbes[0].Probes {
		ports[p.Name] = p.Probe.TCPSocket.Port.IntVal
	}
	if ports["idle#check"] != 7777 || ports["ready#check"] != 8080 {
		t.Fatalf("ports = %v", ports)
	}
}

func TestPodDeletedOrRecreated(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	web := map[string]string{"app": "web"}
	a := env.RunningPod(t, newPod(ns, "a", node.Name, web), "10.5.0.1")
	env.RunningPod(t, newPod(ns, "b", node.Name, web), "10.5.0.2")
	create(t, newMarker(ns, "m", web, tcpProbe("idle", "game")))
	poll.Eventually(t, wait, specIs(node.Name, "a@10.5.0.1:m#idle b@10.5.0.2:m#idle"))

	// Same name, new UID (a StatefulSet pod coming back): the old entry goes, the new one comes.
	oldUID := a.UID
	env.ForceDelete(t, a)
	poll.Eventually(t, wait, specIs(node.Name, "b@10.5.0.2:m#idle"))
	a2 := env.RunningPod(t, newPod(ns, "a", node.Name, web), "10.5.0.9")
	poll.Eventually(t, wait, specIs(node.Name, "a@10.5.0.9:m#idle b@10.5.0.2:m#idle"))
	for _, pp := range getNPP(t, node.Name).Spec.PodProbes {
		if pp.UID == string(oldUID) {
			t.Fatal("entry of the old pod UID left behind")
		}
		if pp.Name == "a" && pp.UID != string(a2.UID) {
			t.Fatalf("entry UID %s, want %s", pp.UID, a2.UID)
		}
	}

	// Terminating pods are not probed any more.
	b := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, b); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, b, client.GracePeriodSeconds(30)); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, wait, specIs(node.Name, "a@10.5.0.9:m#idle"))
	env.ForceDelete(t, b)
}

func TestUnresolvablePortIsReportedOnce(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	web := map[string]string{"app": "web"}
	env.RunningPod(t, newPod(ns, "a", node.Name, web), "10.6.0.1")
	m := newMarker(ns, "m", web, tcpProbe("bad", "metrics"), tcpProbe("good", "game"))
	create(t, m)
	poll.Eventually(t, wait, specIs(node.Name, "a@10.6.0.1:m#good"))
	var notes []string
	events := func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		notes = nil
		for _, e := range evs.Items {
			if e.Reason == EventReasonProbeSkipped && e.Regarding.Kind == "PodProbeMarker" && e.Regarding.Name == "m" {
				if e.Series != nil {
					return fmt.Errorf("event repeated %d times", e.Series.Count)
				}
				notes = append(notes, e.Note)
			}
		}
		if len(notes) == 0 {
			return errors.New("no ProbeSkipped event on the marker")
		}
		return nil
	}
	poll.Eventually(t, wait, events)
	want := `probe "bad" not placed on pod a: tcpSocket: container "main" has no port named "metrics"`
	if len(notes) != 1 || notes[0] != want {
		t.Fatalf("events = %q, want one %q", notes, want)
	}

	// More reconciles of the node: no repeat (a repeat would show as a series).
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels["poke"] = "1"
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	env.SetNodeReady(t, node, false)
	env.SetNodeReady(t, node, true)
	poll.Consistently(t, 500*time.Millisecond, events)
}

func TestNoWriteWhenNothingChanged(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	web := map[string]string{"app": "web"}
	env.RunningPod(t, newPod(ns, "a", node.Name, web), "10.7.0.1")
	m := newMarker(ns, "m", web, tcpProbe("idle", "game"))
	create(t, m)
	poll.Eventually(t, wait, specIs(node.Name, "a@10.7.0.1:m#idle"))
	poll.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if m.Status.ObservedGeneration != m.Generation || m.Status.MatchedPods != 1 {
			return fmt.Errorf("status %+v", m.Status)
		}
		return nil
	})
	// The node reports a result; the marker's counts follow (a change they compute).
	setResult := func(probed time.Time) {
		t.Helper()
		npp := getNPP(t, node.Name)
		npp.Status.PodProbeStatuses = []v1alpha1.PodProbeStatus{{Name: "a", Namespace: ns, UID: npp.Spec.PodProbes[0].UID,
			ProbeStates: []v1alpha1.ContainerProbeState{{Name: "m#idle", State: v1alpha1.ProbeSucceeded, LastProbeTime: metav1.NewTime(probed)}}}}
		if err := env.Client.Status().Update(ctx, npp); err != nil {
			t.Fatal(err)
		}
	}
	setResult(time.Now().Add(-time.Minute))
	poll.Eventually(t, wait, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if got := m.Annotations[v1alpha1.AnnotationResultsSummary]; got != "Succeeded=1 Failed=0 Unknown=0 Error=0" {
			return fmt.Errorf("results %q", got)
		}
		if got := m.Annotations[v1alpha1.AnnotationUnprobed]; got != "1" { // the node has no node service
			return fmt.Errorf("unprobed %q", got)
		}
		return nil
	})
	mark := env.Writes.Len()
	if !wrote(env.Writes.Since(0), "create", "NodePodProbe", node.Name) || !wrote(env.Writes.Since(0), "patch", "NodePodProbe", node.Name) {
		t.Fatal("the write recorder saw neither the create nor the patch of the NodePodProbe")
	}

	// Events that wake both controllers but change nothing they compute.
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Labels["unrelated"] = "x"
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	env.SetNodeReady(t, node, false)
	env.SetNodeReady(t, node, true)
	setResult(time.Now()) // the same result, probed again
	npp := getNPP(t, node.Name)
	poll.Consistently(t, time.Second, func() error {
		var mine []string
		for _, w := range env.Writes.Since(mark) {
			if w.Name == node.Name || w.Namespace == ns {
				mine = append(mine, fmt.Sprintf("%+v", w))
			}
		}
		sort.Strings(mine)
		if len(mine) > 0 {
			return fmt.Errorf("writes although nothing changed: %v", mine)
		}
		return nil
	})
	if got := getNPP(t, node.Name); got.Generation != npp.Generation || got.Spec.PodProbes[0].Probes[0].Name != "m#idle" {
		t.Fatalf("spec changed: generation %d → %d", npp.Generation, got.Generation)
	}
}

func wrote(ws []testenv.Write, verb, kind, name string) bool {
	for _, w := range ws {
		if w.Verb == verb && w.Kind == kind && w.Name == name {
			return true
		}
	}
	return false
}

// Turning the exec-free annotation on and off, which leaves the marker's generation as it is,
// turns the NodePodProbe entry's execFree on and off.
func TestExecFreeAnnotationFollowed(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := env.Node(t, true)
	web := map[string]string{"app": "web"}
	env.RunningPod(t, newPod(ns, "a", node.Name, web), "10.3.0.1")
	m := newMarker(ns, "m", web, v1alpha1.PodContainerProbe{Name: "idle", ContainerName: "main",
		PodConditionType: "game.io/idle", Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/idle"}}}}}})
	create(t, m)
	execFree := func(want bool) func() error {
		return func() error {
			npp := &v1alpha1.NodePodProbe{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: node.Name}, npp); err != nil {
				return err
			}
			if len(npp.Spec.PodProbes) != 1 || len(npp.Spec.PodProbes[0].Probes) != 1 {
				return fmt.Errorf("spec %+v, want one probe", npp.Spec.PodProbes)
			}
			if got := npp.Spec.PodProbes[0].Probes[0].ExecFree; got != want {
				return fmt.Errorf("execFree %t, want %t", got, want)
			}
			return nil
		}
	}
	poll.Eventually(t, wait, execFree(false))
	annotate := func(v string) {
		t.Helper()
		var gen int64
		// The controller writes the marker's status meanwhile: a conflict is read again.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				return err
			}
			gen = m.Generation
			m.Annotations = map[string]string{v1alpha1.AnnotationExecFree: v}
			return env.Client.Update(ctx, m)
		})
		if err != nil {
			t.Fatal(err)
		}
		if m.Generation != gen {
			t.Fatalf("generation moved %d -> %d: the test would not test the predicate", gen, m.Generation)
		}
	}
	annotate("true")
	poll.Eventually(t, wait, execFree(true))
	annotate("false")
	poll.Eventually(t, wait, execFree(false))
}
