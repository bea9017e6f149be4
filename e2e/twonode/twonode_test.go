// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

// Names the scenarios use.
const (
	conditionIdle = "game.example.com/idle"
	labelIdle     = "game.example.com/idle"
	groupLabel    = "example.com/group"
	markerCtr     = "main"
	appContainer  = "app"
	// idleFile is what the marker's probe reads: present means idle.
	idleFile = "/tmp/idle"
	// failFile makes the liveness probe fail while it exists.
	failFile = "/tmp/fail"
	// appScript serves the liveness probes (framework.FailingWhile) and exits at once on SIGTERM,
	// so a restart takes no grace period.
	appScript    = framework.ServingScript
	appPort      = framework.ServingPort
	waitPodReady = 2 * time.Minute
	// waitMarks bounds a probe result reaching the pod: a probe period (1 s), the node's status
	// write and two controllers, with room for a loaded 2-core machine.
	waitMarks = 60 * time.Second
	// waitRestart bounds a liveness failure becoming a restarted container.
	waitRestart = 90 * time.Second
)

var livenessProbeName = v1alpha1.LivenessProbeName(appContainer)

// idleProbe is the idle marker's probe as NodePodProbe and the node service name it: <marker>#<probe>.
const idleProbe = "idle#idle"

// suite is the cluster deployment and one node service per node, each under its node's own
// dedicated identity.
type suite struct {
	c          *framework.Cluster
	a, b       *rig.Node
	svcA, svcB *framework.NodeService
}

// TestTwoNodes deploys the cluster part, starts a node service on each node and runs the
// scenarios: those that leave the nodes alone at once, then those that take node B or its
// service away, one after another.
func TestTwoNodes(t *testing.T) {
	c := framework.Get(t)
	nodes := c.Nodes()
	if len(nodes) != 2 {
		t.Fatalf("the rig has %d nodes, want 2", len(nodes))
	}
	t0 := time.Now()
	if err := cluster.Deploy(framework.Context(t, 4*time.Minute), c, t.Logf); err != nil {
		t.Fatal(err)
	}
	s := &suite{c: c, a: nodes[0], b: nodes[1]}
	s.waitNPP(t, s.b.Name())
	t.Logf("cluster deployment ready in %s", time.Since(t0).Round(time.Millisecond))
	s.svcA = c.StartNodeServiceOn(t, s.a, s.dedicatedKubeconfig(t, s.a))
	s.svcB = c.StartNodeServiceOn(t, s.b, s.dedicatedKubeconfig(t, s.b))
	// Enhanced-liveness pods go only to served nodes: both, before any is created.
	c.WaitForServed(t, s.a.Name(), s.b.Name())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster deployment:\n%s", cluster.Diagnose(c))
			t.Logf("node service of %s (end of log):\n%s", s.a.Name(), logtail.Last(s.svcA.Logs(), 40))
			t.Logf("node service of %s (end of log):\n%s", s.b.Name(), logtail.Last(s.svcB.Logs(), 40))
		}
	})

	t.Run("both nodes", func(t *testing.T) {
		t.Run("each node probes its own pods", s.testOwnPods)
		t.Run("a node may not write the other's objects", s.testRefused)
		t.Run("the breaker counts pods on both nodes", s.testBreaker)
	})
	t.Run("node B deleted and registered again", s.testReregister)
	t.Run("node B's service stopped, killed, revoked", s.testSilentService)
	t.Run("heartbeat", s.testHeartbeat)
	t.Run("heartbeat on the kubelet's identity", s.testKubeletHeartbeat)

	cluster.CheckNoPanics(t, c, s.svcA)
	cluster.CheckNoPanics(t, c, s.svcB)
}

// dedicatedKubeconfig is a kubeconfig for node n's dedicated identity (framework.DedicatedNodeUser),
// the one the node services of this suite run as, so that they write their heartbeat Lease
// themselves; testKubeletHeartbeat runs node B's on the kubelet's own identity, whose Lease the
// cluster deployment's heartbeat endpoint renews.
func (s *suite) dedicatedKubeconfig(t testing.TB, n *rig.Node) string {
	t.Helper()
	user, groups := framework.DedicatedNodeUser(n.Name())
	kc, err := s.c.Rig.Kubeconfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// ---- pods and markers ----

// markerPod runs a game server pod on node n, idle (idleFile present), in group gs.
func (s *suite) markerPod(t testing.TB, ns, name string, n *rig.Node) *corev1.Pod {
	t.Helper()
	p := framework.NewPod(ns, name, framework.Shell(markerCtr, "echo 'no players' > "+idleFile+"; "+appScript))
	p.Labels[groupLabel] = "gs"
	p.Spec.NodeName = n.Name()
	return s.c.WaitForPodReady(t, s.c.CreatePod(t, p), waitPodReady)
}

// idleMarker probes every pod of group gs in ns: condition conditionIdle, label labelIdle=true
// while the probe succeeds.
func idleMarker(ns string) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{groupLabel: "gs"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "idle", ContainerName: markerCtr, PodConditionType: conditionIdle,
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", idleFile}}},
					PeriodSeconds: 1, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 1,
				}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{labelIdle: "true"}}},
			}},
		},
	}
}

func (s *suite) createMarker(t testing.TB, m *v1alpha1.PodProbeMarker) {
	t.Helper()
	if err := s.c.Client.Create(framework.Context(t, time.Minute), m); err != nil {
		t.Fatalf("create PodProbeMarker %s/%s: %v", m.Namespace, m.Name, err)
	}
}

// livePod runs a pod on node n whose container app has an enhanced liveness probe that fails
// while failFile exists, and waits until it is Ready and the probe succeeds.
func (s *suite) livePod(t testing.TB, ns, name string, n *rig.Node, edit ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	ctr := framework.Shell(appContainer, appScript)
	ctr.LivenessProbe = livenessProbe(framework.FailingWhile(failFile))
	p := framework.NewPod(ns, name, ctr)
	p.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}
	p.Spec.NodeName = n.Name()
	for _, e := range edit {
		e(p)
	}
	p = s.c.WaitForPodReady(t, s.c.CreatePod(t, p), waitPodReady)
	s.waitProbe(t, n, p, livenessProbeName, v1alpha1.ProbeSucceeded)
	return p
}

// livenessProbe runs h every second, from a second after the container starts (appScript's
// server listens by then). The timeout of 5 s keeps a slow answer on a loaded machine from
// counting as a failure the test did not make.
func livenessProbe(h corev1.ProbeHandler) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        h,
		InitialDelaySeconds: 1, PeriodSeconds: 1, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 1,
	}
}

// exec runs cmd in the container, again while it fails for up to 30 s: a kubelet that has just
// restarted refuses exec into pods it has not synced yet.
func (s *suite) exec(t testing.TB, p *corev1.Pod, container string, cmd ...string) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, time.Minute), 30*time.Second, fmt.Sprintf("exec %v in %s", cmd, p.Name),
		func(ctx context.Context) (bool, string, error) {
			_, stderr, err := s.c.Exec(ctx, p.Namespace, p.Name, container, cmd...)
			if err != nil {
				return false, fmt.Sprintf("%v %s", err, stderr), nil
			}
			return true, "", nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

// setIdle makes the marker probe of p succeed (idle) or fail.
func (s *suite) setIdle(t testing.TB, p *corev1.Pod, idle bool) {
	t.Helper()
	if idle {
		s.exec(t, p, markerCtr, "sh", "-c", "echo 'no players' > "+idleFile)
	} else {
		s.exec(t, p, markerCtr, "rm", "-f", idleFile)
	}
}

// ---- what the pods and NodePodProbes show ----

func condition(p *corev1.Pod, typ string) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if string(p.Status.Conditions[i].Type) == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// idleIs reports whether the marks of the idle marker on p say idle (want True) or busy (False).
func idleIs(p *corev1.Pod, want corev1.ConditionStatus) bool {
	c := condition(p, conditionIdle)
	if c == nil || c.Status != want {
		return false
	}
	_, labelled := p.Labels[labelIdle]
	return labelled == (want == corev1.ConditionTrue)
}

func describeIdle(p *corev1.Pod) string {
	c := condition(p, conditionIdle)
	if c == nil {
		return fmt.Sprintf("%s: no condition, label %q", p.Name, p.Labels[labelIdle])
	}
	return fmt.Sprintf("%s: condition %s %q, label %q", p.Name, c.Status, c.Message, p.Labels[labelIdle])
}

// waitIdle waits until the marks on p say idle (True) or busy (False).
func (s *suite) waitIdle(t testing.TB, p *corev1.Pod, want corev1.ConditionStatus) *corev1.Pod {
	t.Helper()
	got, err := s.c.WaitForPod(framework.Context(t, waitMarks+time.Minute), p.Namespace, p.Name, waitMarks,
		fmt.Sprintf("%s %s", conditionIdle, want), func(p *corev1.Pod) bool { return idleIs(p, want) })
	if err != nil {
		t.Fatalf("%v\n%s", err, s.explain(p))
	}
	return got
}

func (s *suite) pod(t testing.TB, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	cur, err := s.c.Kube.CoreV1().Pods(p.Namespace).Get(framework.Context(t, 30*time.Second), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

func restarts(p *corev1.Pod, container string) int32 {
	if st := framework.ContainerStatus(p, container); st != nil {
		return st.RestartCount
	}
	return -1
}

func (s *suite) npp(ctx context.Context, node string) (*v1alpha1.NodePodProbe, error) {
	npp := &v1alpha1.NodePodProbe{}
	return npp, s.c.Client.Get(ctx, client.ObjectKey{Name: node}, npp)
}

// waitNPP waits until the node's NodePodProbe exists and returns it.
func (s *suite) waitNPP(t testing.TB, node string) *v1alpha1.NodePodProbe {
	t.Helper()
	var npp *v1alpha1.NodePodProbe
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, "NodePodProbe "+node, func(ctx context.Context) (bool, string, error) {
		var err error
		npp, err = s.npp(ctx, node)
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return npp
}

// nppPods lists the pods of namespace ns in the NodePodProbe's spec and in its status, by name.
func nppPods(npp *v1alpha1.NodePodProbe, ns string) (spec, status []string) {
	for _, pp := range npp.Spec.PodProbes {
		if pp.Namespace == ns {
			spec = append(spec, pp.Name)
		}
	}
	for _, ps := range npp.Status.PodProbeStatuses {
		if ps.Namespace == ns {
			status = append(status, ps.Name)
		}
	}
	sort.Strings(spec)
	sort.Strings(status)
	return spec, status
}

// probeState is the state of the pod's probe in the node's NodePodProbe status.
func probeState(npp *v1alpha1.NodePodProbe, p *corev1.Pod, probe string) v1alpha1.ContainerProbeState {
	for _, ps := range npp.Status.PodProbeStatuses {
		if ps.UID == string(p.UID) {
			for _, st := range ps.ProbeStates {
				if st.Name == probe {
					return st
				}
			}
		}
	}
	return v1alpha1.ContainerProbeState{}
}

func (s *suite) waitProbe(t testing.TB, n *rig.Node, p *corev1.Pod, probe string, want v1alpha1.ProbeState) {
	t.Helper()
	if err := s.c.WaitForProbeState(framework.Context(t, 2*time.Minute), n.Name(), p.UID, probe, want, time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, s.explain(p))
	}
}

// explain is the state around a pod, for failure messages.
func (s *suite) explain(p *corev1.Pod) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	cur, err := s.c.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("pod %s: %v", p.Name, err)
	}
	fmt.Fprintf(&b, "pod %s on %s: %s\n  %s\n", cur.Name, cur.Spec.NodeName, framework.DescribePod(cur), describeIdle(cur))
	if npp, err := s.npp(ctx, cur.Spec.NodeName); err == nil {
		for _, ps := range npp.Status.PodProbeStatuses {
			if ps.UID == string(cur.UID) {
				for _, st := range ps.ProbeStates {
					fmt.Fprintf(&b, "  probe %s: %s since %s %q\n", st.Name, st.State, st.LastTransitionTime, st.Message)
				}
			}
		}
	} else if apierrors.IsNotFound(err) {
		fmt.Fprintf(&b, "  NodePodProbe %s: not found\n", cur.Spec.NodeName)
	}
	if evs, err := s.c.Events(ctx, p.Namespace, p.Name); err == nil {
		b.WriteString("  events:\n" + framework.FormatEvents(evs))
	}
	return b.String()
}
