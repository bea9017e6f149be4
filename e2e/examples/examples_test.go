// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package examples applies every example of docs/examples on the rig, each into a namespace of its
// own, and checks what its README promises (issue 34): an example that stops working fails here.
// It has a rig of its own, so its pods never starve e2e/cluster's scenarios.
package examples

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/liveness"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

func TestMain(m *testing.M) {
	// Four examples at a time: their pods' probes run every 1-2 s, beside another package's rig.
	_ = flag.Set("test.parallel", "4")
	logf.SetLogger(logr.Discard())
	framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme),
		// The game servers run busybox, which the demo pushes too (e2e/cmd/demo images).
		framework.WithImages(cluster.Image(), rig.Image{Ref: "busybox:1.36", Busybox: true, Cmd: []string{"sh"}}))
}

// examplesDir holds the examples of the docs: one folder each, its manifests applied in name order.
const examplesDir = "../../docs/examples"

const (
	waitPodReady = 90 * time.Second
	waitMarks    = 45 * time.Second // a probe result reaching the pod: probe period 1-2 s, two controllers
	// waitExample bounds an example's first wait: its pods are created from the manifests (image,
	// scheduling, the kubelet) and then marked.
	waitExample = waitPodReady + waitMarks
	// waitRestart bounds a restart: a failing probe seen, the decider's window, a request, the
	// container stopped (after its preStop hook) and started again by the kubelet.
	waitRestart = 90 * time.Second
)

type suite struct {
	c   *framework.Cluster
	svc *framework.NodeService
}

// exampleChecks asserts, per folder of docs/examples, what its README promises. A folder without
// an entry fails the test: an example cannot be added unchecked.
var exampleChecks = map[string]func(s *suite, t *testing.T, ns string){
	"game-servers":        checkGameServers,
	"enhanced-liveness":   checkEnhancedLiveness,
	"restart-a-container": checkRestartContainer,
	"role-marker":         checkRoleMarker,
	"readiness-gate":      checkReadinessGate,
	"http-probes":         checkHTTPProbes,
	"dry-run":             checkDryRun,
}

// TestExamples deploys the cluster part as the docs install it (cluster/deploy), starts the node
// service, then applies every example into a namespace of its own and runs its check.
func TestExamples(t *testing.T) {
	c := framework.Get(t)
	t0 := time.Now()
	if err := cluster.Deploy(framework.Context(t, 4*time.Minute), c, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster deployment ready in %s", time.Since(t0).Round(time.Millisecond))
	s := &suite{c: c, svc: c.StartNodeService(t)}
	c.WaitForServed(t, c.Rig.NodeName()) // enhanced-liveness pods are scheduled only onto served nodes
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster deployment:\n%s", cluster.Diagnose(c))
		}
	})

	entries, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	for name := range exampleChecks {
		if !slices.Contains(dirs, name) {
			t.Errorf("exampleChecks has %q, docs/examples has no such folder", name)
		}
	}
	t.Run("examples", func(t *testing.T) {
		for _, dir := range dirs {
			t.Run(dir, func(t *testing.T) {
				check, ok := exampleChecks[dir]
				if !ok {
					t.Fatalf("docs/examples/%s has no check: add one to exampleChecks", dir)
				}
				t.Parallel()
				ns := s.c.Namespace(t)
				s.applyManifests(t, ns, filepath.Join(examplesDir, dir))
				check(s, t, ns)
			})
		}
	})
	// After the examples (never beside them: the commands apply their own copies of some).
	t.Run("doc commands", s.testDocCommands)
	cluster.CheckNoPanics(t, c, s.svc)
}

// applyManifests creates the objects of the YAML files of dir (not its subfolders), in file-name
// order, in namespace ns: an example names a namespace of its own, which the test replaces by a
// fresh one (its Namespace object is skipped).
func (s *suite) applyManifests(t *testing.T, ns, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no manifests", dir)
	}
	slices.Sort(files)
	ctx := framework.Context(t, time.Minute)
	for _, f := range files {
		objs, err := readManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetKind() == "Namespace" {
				continue
			}
			namespaced, err := s.c.Client.IsObjectNamespaced(u)
			if err != nil {
				t.Fatalf("%s: %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
			if namespaced {
				u.SetNamespace(ns)
			}
			if err := s.c.Client.Create(ctx, u); err != nil {
				t.Fatalf("%s: create %s %s: %v", f, u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// readManifests decodes the objects of a multi-document YAML file (numbers as int64, as the API
// machinery's unstructured objects want them).
func readManifests(file string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		j, err := yaml.ToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if s := string(bytes.TrimSpace(j)); s == "null" || s == "" { // only comments, or after a trailing ---
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, u)
	}
}

// waitPods waits until the namespace has exactly n live pods matching selector, all satisfying
// check, and returns them sorted by name.
func (s *suite) waitPods(t *testing.T, ns, selector string, n int, what string, timeout time.Duration, check framework.PodCheck) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := framework.WaitFor(framework.Context(t, timeout+time.Minute), timeout, fmt.Sprintf("%s: %d pods %s: %s", ns, n, selector, what),
		func(ctx context.Context) (bool, string, error) {
			list, err := s.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, err.Error(), nil
			}
			pods = list.Items
			var miss []string
			for i := range pods {
				if pods[i].DeletionTimestamp != nil {
					miss = append(miss, pods[i].Name+" terminating")
				} else if ok, why := check(&pods[i]); !ok {
					miss = append(miss, pods[i].Name+": "+why)
				}
			}
			if len(pods) != n {
				miss = append(miss, fmt.Sprintf("%d pods", len(pods)))
			}
			return len(miss) == 0, strings.Join(miss, "; "), nil
		})
	if err != nil {
		msg := err.Error()
		if len(pods) > 0 {
			msg += "\n" + s.c.ExplainPod(&pods[0], s.svc)
		}
		t.Fatal(msg)
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// waitPod waits until check holds for the pod and returns it as last seen.
func (s *suite) waitPod(t *testing.T, pod *corev1.Pod, what string, timeout time.Duration, check framework.PodCheck) *corev1.Pod {
	t.Helper()
	last, err := s.c.WaitForPodCheck(framework.Context(t, timeout+time.Minute), pod.Namespace, pod.Name, timeout, what, check)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.c.ExplainPod(pod, s.svc))
	}
	return last
}

// waitNPPState waits for the named probe of the pod to be in state in the NodePodProbe status.
func (s *suite) waitNPPState(t *testing.T, pod *corev1.Pod, name string, state v1alpha1.ProbeState) {
	t.Helper()
	if err := s.c.WaitForProbeState(framework.Context(t, 2*time.Minute), s.c.Rig.NodeName(), pod.UID, name, state, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, s.c.ExplainPod(pod, s.svc))
	}
}

// ---- the checks ----

// game-servers: the three servers are marked idle; one that starts a match is marked busy.
func checkGameServers(s *suite, t *testing.T, ns string) {
	const cond, label, cost = "game.example.com/idle", "gameserver-idle", "controller.kubernetes.io/pod-deletion-cost"
	idle := framework.All(framework.CondIs(cond, corev1.ConditionTrue, "waiting for players"), framework.LabelIs(label, "true"),
		framework.AnnotationIs(cost, "-10"))
	busy := framework.All(framework.CondIs(cond, corev1.ConditionFalse, "/tmp/idle"), framework.LabelGone(label),
		framework.AnnotationIs(cost, "10"))
	pods := s.waitPods(t, ns, "app=gameserver", 3, "idle", waitExample, idle)
	s.c.MustExec(t, ns, pods[0].Name, "server", "rm", "/tmp/idle")
	s.waitPod(t, &pods[0], "busy", waitMarks, busy)
}

// enhanced-liveness: every pod is protected, its livenessProbe moved into the annotation; a
// failing probe has the decider restart exactly that container, once.
func checkEnhancedLiveness(s *suite, t *testing.T, ns string) {
	protected := func(p *corev1.Pod) (bool, string) {
		for _, c := range p.Spec.Containers {
			if c.LivenessProbe != nil {
				return false, "container " + c.Name + " kept its livenessProbe"
			}
		}
		if _, ok := p.Annotations[v1alpha1.AnnotationContainerProbeContext]; !ok {
			return false, "no annotation " + v1alpha1.AnnotationContainerProbeContext
		}
		return framework.CondIs(string(liveness.ConditionLivenessProtected), corev1.ConditionTrue, "")(p)
	}
	pods := s.waitPods(t, ns, "app=web", 3, "Ready and protected", waitExample, framework.All(framework.Ready, protected))
	for i := range pods {
		s.waitNPPState(t, &pods[i], "app-livenessProbe", v1alpha1.ProbeSucceeded)
	}
	// The decider judges the restart by the budget: wait for the disruption controller to count it.
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, "PodDisruptionBudget web allows 1", func(ctx context.Context) (bool, string, error) {
		pdb, err := s.c.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return pdb.Status.DisruptionsAllowed == 1, fmt.Sprintf("status %+v", pdb.Status), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	target := &pods[1]
	s.c.MustExec(t, ns, target.Name, "app", "rm", "/tmp/healthy")
	s.waitPod(t, target, "app restarted once", waitRestart, framework.RestartCount("app", 1))
	// The new container made the file again: the probe recovers, and nothing restarts it again.
	s.waitNPPState(t, target, "app-livenessProbe", v1alpha1.ProbeSucceeded)
	s.waitPods(t, ns, "app=web", 3, "Ready, the target restarted once, the others never", waitPodReady, framework.All(framework.Ready, func(p *corev1.Pod) (bool, string) {
		if p.Name == target.Name {
			return framework.RestartCount("app", 1)(p)
		}
		return framework.RestartCount("app", 0)(p)
	}))
}

// restart-a-container: the request of step2 restarts app once, after its preStop hook, and
// leaves sidecar and the pod alone.
func checkRestartContainer(s *suite, t *testing.T, ns string) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0"}}
	before := s.c.WaitForPodReady(t, pod, waitPodReady)
	s.applyManifests(t, ns, filepath.Join(examplesDir, "restart-a-container", "step2"))

	var crr v1alpha1.ContainerRecreateRequest
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), waitRestart, "ContainerRecreateRequest web-0-app Completed", func(ctx context.Context) (bool, string, error) {
		if err := s.c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-0-app"}, &crr); err != nil {
			return false, err.Error(), nil
		}
		return crr.Status.Phase == v1alpha1.ContainerRecreateRequestCompleted, fmt.Sprintf("status %+v", crr.Status), nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.c.ExplainPod(pod, s.svc))
	}
	if st := crr.Status.ContainerRecreateStates; len(st) != 1 || st[0].Name != "app" || st[0].Phase != v1alpha1.ContainerRecreateRequestSucceeded {
		t.Errorf("container states %+v, want app Succeeded", st)
	}
	after := s.waitPod(t, pod, "app restarted once, sidecar never, Ready", waitPodReady, framework.All(framework.RestartCount("app", 1), framework.RestartCount("sidecar", 0), framework.Ready))
	if after.UID != before.UID {
		t.Errorf("pod UID %s, was %s: the pod was replaced, not restarted in place", after.UID, before.UID)
	}
	out, _, err := s.c.Exec(framework.Context(t, time.Minute), ns, "web-0", "sidecar", "cat", "/shared/prestop.log")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, "preStop of app ran") != 1 {
		t.Errorf("/shared/prestop.log = %q, want the line of app's preStop hook once", out)
	}
}

// role-marker: db-0 is labelled primary and db-1 secondary, the Service's endpoint is db-0's; a
// failover swaps the labels and the endpoint.
func checkRoleMarker(s *suite, t *testing.T, ns string) {
	const cond = "db.example.com/primary"
	primary := framework.All(framework.CondIs(cond, corev1.ConditionTrue, ""), framework.LabelIs("role", "primary"))
	secondary := framework.All(framework.CondIs(cond, corev1.ConditionFalse, ""), framework.LabelIs("role", "secondary"))
	roles := func(primaryName string) framework.PodCheck {
		return func(p *corev1.Pod) (bool, string) {
			if p.Name == primaryName {
				return primary(p)
			}
			return secondary(p)
		}
	}
	s.waitPods(t, ns, "app=db", 2, "db-0 primary, db-1 secondary", waitExample, roles("db-0"))
	s.waitPrimaryEndpoint(t, ns, "db-0")

	s.c.MustExec(t, ns, "db-0", "db", "rm", "/tmp/primary")
	s.c.MustExec(t, ns, "db-1", "db", "touch", "/tmp/primary")
	s.waitPods(t, ns, "app=db", 2, "db-1 primary, db-0 secondary", waitMarks, roles("db-1"))
	s.waitPrimaryEndpoint(t, ns, "db-1")
}

// waitPrimaryEndpoint waits until the Service db-primary's only endpoint is pod name's.
func (s *suite) waitPrimaryEndpoint(t *testing.T, ns, name string) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, "Service db-primary's endpoint is "+name, func(ctx context.Context) (bool, string, error) {
		list, err := s.c.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=db-primary"})
		if err != nil {
			return false, err.Error(), nil
		}
		var got []string
		for _, es := range list.Items {
			for _, ep := range es.Endpoints {
				if ep.TargetRef != nil {
					got = append(got, ep.TargetRef.Name)
				}
			}
		}
		return slices.Equal(got, []string{name}), fmt.Sprintf("endpoints %v", got), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readiness-gate: the gate holds the ready container's pod unready until warm, then Ready, and
// unready again when cold.
func checkReadinessGate(s *suite, t *testing.T, ns string) {
	const gate = "cache.example.com/warm"
	cold := framework.All(framework.CondIs(gate, corev1.ConditionFalse, ""), framework.CondIs(string(corev1.ContainersReady), corev1.ConditionTrue, ""),
		framework.CondIs(string(corev1.PodReady), corev1.ConditionFalse, ""))
	pods := s.waitPods(t, ns, "app=cache", 1, "containers ready, gate False, not Ready", waitExample, cold)
	s.c.MustExec(t, ns, pods[0].Name, "cache", "touch", "/tmp/warm")
	s.waitPod(t, &pods[0], "gate True, Ready", waitMarks, framework.All(framework.CondIs(gate, corev1.ConditionTrue, ""), framework.CondIs(string(corev1.PodReady), corev1.ConditionTrue, "")))
	s.c.MustExec(t, ns, pods[0].Name, "cache", "rm", "/tmp/warm")
	s.waitPod(t, &pods[0], "gate False, not Ready again", waitMarks, cold)
}

// http-probes: a 503 turns healthy False (the code in the message, the label false) while the
// port keeps listening; 200 turns it back.
func checkHTTPProbes(s *suite, t *testing.T, ns string) {
	healthy := framework.All(framework.CondIs("api.example.com/healthy", corev1.ConditionTrue, ""), framework.LabelIs("api-healthy", "true"),
		framework.CondIs("api.example.com/listening", corev1.ConditionTrue, ""))
	pods := s.waitPods(t, ns, "app=api", 1, "healthy, listening", waitExample, healthy)
	s.c.MustExec(t, ns, pods[0].Name, "api", "localhttp-server", "set", "503")
	s.waitPod(t, &pods[0], "unhealthy, still listening", waitMarks, framework.All(framework.CondIs("api.example.com/healthy", corev1.ConditionFalse, "503"),
		framework.LabelIs("api-healthy", "false"), framework.CondIs("api.example.com/listening", corev1.ConditionTrue, "")))
	s.c.MustExec(t, ns, pods[0].Name, "api", "localhttp-server", "set", "200")
	s.waitPod(t, &pods[0], "healthy again", waitMarks, healthy)
}

// dry-run: the marker counts its results while the pods carry nothing of it; taken live, it
// marks them.
func checkDryRun(s *suite, t *testing.T, ns string) {
	const cond = "worker.example.com/ok"
	unmarked := framework.All(framework.Ready, framework.NoCondition(cond), framework.LabelGone("worker-broken"))
	pods := s.waitPods(t, ns, "app=worker", 2, "Ready", waitPodReady, unmarked)
	m := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"}}
	s.waitSummary(t, m, "Succeeded=2 Failed=0 Unknown=0 Error=0")
	s.c.MustExec(t, ns, pods[0].Name, "worker", "rm", "/tmp/ok")
	s.waitSummary(t, m, "Succeeded=1 Failed=1 Unknown=0 Error=0")
	// The failure is counted: had the marker written anything, it would be on the pods by now.
	s.waitPods(t, ns, "app=worker", 2, "still nothing of the marker", waitMarks, unmarked)

	s.c.EditMarker(t, m, func(m *v1alpha1.PodProbeMarker) { m.Annotations[v1alpha1.AnnotationDryRun] = "false" })
	s.waitPod(t, &pods[0], "live: broken", waitMarks, framework.All(framework.CondIs(cond, corev1.ConditionFalse, ""), framework.LabelIs("worker-broken", "true")))
	s.waitPod(t, &pods[1], "live: ok", waitMarks, framework.All(framework.CondIs(cond, corev1.ConditionTrue, ""), framework.LabelGone("worker-broken")))
}

// waitSummary waits for the marker's results summary annotation to be want.
func (s *suite) waitSummary(t *testing.T, m *v1alpha1.PodProbeMarker, want string) {
	t.Helper()
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), waitMarks, fmt.Sprintf("PodProbeMarker %s/%s %s %q", m.Namespace, m.Name, v1alpha1.AnnotationResultsSummary, want),
		func(ctx context.Context) (bool, string, error) {
			cur := &v1alpha1.PodProbeMarker{}
			if err := s.c.Client.Get(ctx, client.ObjectKeyFromObject(m), cur); err != nil {
				return false, err.Error(), nil
			}
			got := cur.Annotations[v1alpha1.AnnotationResultsSummary]
			return got == want, fmt.Sprintf("%q (results %s)", got, cur.Annotations[v1alpha1.AnnotationResults]), nil
		})
	if err != nil {
		t.Fatal(err)
	}
}
