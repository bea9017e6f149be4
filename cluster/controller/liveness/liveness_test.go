// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package liveness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/internal/nppspec"
	"github.com/probeshim/probeshim/cluster/internal/testenv"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

var (
	env        *testenv.Env
	skipReason string
	ctx        = context.Background()
)

const wait = 10 * time.Second

func TestMain(m *testing.M) {
	testenv.Main(m, func(mgr ctrl.Manager) error { return SetupWithManager(mgr) }, &env, &skipReason)
}

func probeContext(t testing.TB, probes ...v1alpha1.ContainerLivenessProbe) string {
	v, err := v1alpha1.FormatContainerProbeContext(probes)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func httpLiveness(container, port string) v1alpha1.ContainerLivenessProbe {
	return v1alpha1.ContainerLivenessProbe{Name: container, LivenessProbe: corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString(port)}},
		FailureThreshold: 3, PeriodSeconds: 5}}
}

func livenessPod(t testing.TB, ns, name, node string, probes ...v1alpha1.ContainerLivenessProbe) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{
			v1alpha1.AnnotationUsingEnhancedLiveness: "true",
			v1alpha1.AnnotationContainerProbeContext: probeContext(t, probes...),
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "main", Image: "busybox", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			{Name: "side", Image: "busybox"},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.9.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}},
	}
}

func render(pods []v1alpha1.PodProbe) string {
	var parts []string
	for _, pp := range pods {
		var ps []string
		for _, p := range pp.Probes {
			ps = append(ps, p.Name+"@"+p.ContainerName)
		}
		parts = append(parts, pp.Name+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " ")
}

func TestDesiredEntries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pod   func(*corev1.Pod)
		want  string
		skips string
	}{
		{name: "every container", pod: func(*corev1.Pod) {}, want: "p:main-livenessProbe@main,side-livenessProbe@side"},
		{name: "not opted in", pod: func(p *corev1.Pod) { p.Annotations[v1alpha1.AnnotationUsingEnhancedLiveness] = "false" }},
		{name: "no probe context (no liveness probes)", pod: func(p *corev1.Pod) { delete(p.Annotations, v1alpha1.AnnotationContainerProbeContext) }},
		{name: "not probeable yet", pod: func(p *corev1.Pod) { p.Status.PodIP = "" }},
		{name: "unreadable context", pod: func(p *corev1.Pod) { p.Annotations[v1alpha1.AnnotationContainerProbeContext] = "{" },
			skips: "annotation apps.kruise.io/container-probe-context: unexpected end of JSON input"},
		{name: "unknown container", pod: func(p *corev1.Pod) { p.Spec.Containers = p.Spec.Containers[:1] },
			want:  "p:main-livenessProbe@main",
			skips: `annotation apps.kruise.io/container-probe-context names container "side", which the pod does not have`},
		{name: "a probe the node would refuse (annotation edited after CREATE)", pod: func(p *corev1.Pod) {
			bad := httpLiveness("side", "9090")
			bad.LivenessProbe.SuccessThreshold = 2
			p.Annotations[v1alpha1.AnnotationContainerProbeContext] = probeContext(t, httpLiveness("main", "http"), bad)
		},
			want:  "p:main-livenessProbe@main",
			skips: `liveness probe of container "side": livenessProbe.successThreshold: Invalid value: 2: must be 1 for a liveness probe`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := livenessPod(t, "ns", "p", "n", httpLiveness("main", "http"), httpLiveness("side", "9090"))
			tc.pod(pod)
			got, skipped := desiredEntries([]corev1.Pod{*pod})
			if r := render(got); r != tc.want {
				t.Errorf("entries = %q, want %q", r, tc.want)
			}
			var reasons []string
			for _, s := range skipped {
				reasons = append(reasons, s.reason)
			}
			if r := strings.Join(reasons, "; "); r != tc.skips {
				t.Errorf("skips = %q, want %q", r, tc.skips)
			}
		})
	}
}

// A pod's liveness probes over their bound (the annotation edited after admission) are not placed.
func TestDesiredEntriesBoundAPod(t *testing.T) {
	big := httpLiveness("main", "http")
	big.LivenessProbe.HTTPGet.Path = "/" + strings.Repeat("x", v1alpha1.MaxContainerProbeContextBytes)
	pod := livenessPod(t, "ns", "p", "n", big)
	got, skipped := desiredEntries([]corev1.Pod{*pod})
	if len(got) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0].reason, "over the 8192 a pod's liveness probes may take") {
		t.Errorf("entries %q, skips %+v", render(got), skipped)
	}
}

// Past the node budget, liveness probes are shared fairly between namespaces: a namespace with
// many probed pods loses the pods over its share, each reported; a modest namespace keeps all.
func TestLivenessFitsTheNodeBudget(t *testing.T) {
	var pods []corev1.Pod
	for i := range 20 {
		pods = append(pods, *livenessPod(t, "greedy", fmt.Sprintf("g%02d", i), "n", httpLiveness("main", "http"), httpLiveness("side", "9090")))
	}
	pods = append(pods, *livenessPod(t, "modest", "m", "n", httpLiveness("main", "http")))
	entries, skipped := desiredEntries(pods)
	if len(entries) != 21 || len(skipped) != 0 {
		t.Fatalf("%d entries, skips %+v", len(entries), skipped)
	}
	all := nppspec.EntriesCost(entries, nppspec.LivenessProbes)
	if kept, over := fitBudget(entries, pods, "n", all); len(kept) != 21 || len(over) != 0 {
		t.Fatalf("within the budget: %d kept, %d left out", len(kept), len(over))
	}
	budget := all / 2
	kept, over := fitBudget(entries, pods, "n", budget)
	if c := nppspec.EntriesCost(kept, nppspec.LivenessProbes); c > budget {
		t.Errorf("kept %d bytes of liveness, budget %d", c, budget)
	}
	if !strings.Contains(render(kept), "m:main-livenessProbe@main") {
		t.Errorf("the modest namespace lost its pod: %s", render(kept))
	}
	if len(over) == 0 || len(kept)+len(over) != 21 {
		t.Fatalf("%d kept, %d left out", len(kept), len(over))
	}
	for _, s := range over {
		if s.pod.Namespace != "greedy" || !strings.Contains(s.reason, "node n has no room for it") ||
			!strings.Contains(s.reason, "the pod runs without liveness on this node") {
			t.Errorf("left out %s/%s: %s", s.pod.Namespace, s.pod.Name, s.reason)
		}
	}
}

func TestDesiredEntriesResolvesNamedPorts(t *testing.T) {
	pod := livenessPod(t, "ns", "p", "n", httpLiveness("main", "http"))
	got, _ := desiredEntries([]corev1.Pod{*pod})
	if len(got) != 1 || got[0].UID != "uid-p" || got[0].IP != "10.9.0.1" {
		t.Fatalf("entries = %+v", got)
	}
	p := got[0].Probes[0].Probe
	if p.HTTPGet.Port != intstr.FromInt32(8080) || p.FailureThreshold != 3 || p.PeriodSeconds != 5 {
		t.Fatalf("probe = %+v", p)
	}
}

// An exec liveness probe's $(VAR) references are expanded from the container's env, as the kubelet
// expands them, before the command reaches the node.
func TestDesiredEntriesExpandsEnv(t *testing.T) {
	exec := v1alpha1.ContainerLivenessProbe{Name: "main", LivenessProbe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "wget -q -O- 127.0.0.1:$(PORT)/healthz || exit $$(false)", "$(UNSET)"}}}}}
	pod := livenessPod(t, "ns", "p", "n", exec)
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PORT", Value: "8080"}}
	got, skipped := desiredEntries([]corev1.Pod{*pod})
	if len(got) != 1 || len(skipped) != 0 {
		t.Fatalf("entries %+v, skipped %+v", got, skipped)
	}
	want := []string{"sh", "-c", "wget -q -O- 127.0.0.1:8080/healthz || exit $(false)", "$(UNSET)"}
	if cmd := got[0].Probes[0].Probe.Exec.Command; fmt.Sprint(cmd) != fmt.Sprint(want) {
		t.Errorf("command %q, want %q", cmd, want)
	}
	// The pod's annotation keeps the command as written.
	if !strings.Contains(pod.Annotations[v1alpha1.AnnotationContainerProbeContext], "$(PORT)") {
		t.Error("the annotation was changed")
	}
}

// As the kubelet: no liveness probe before the container's startup probe has succeeded (status
// started true). A sidecar's status is read from the init container statuses. A container without
// a startup probe is not held: it has started when it runs, which the node service sees.
func TestDesiredEntriesWaitForStarted(t *testing.T) {
	yes, no := true, false
	withStartupProbes := func(pod *corev1.Pod) *corev1.Pod {
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				cs[i].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
			}
		}
		return pod
	}
	for _, tc := range []struct {
		name     string
		statuses []corev1.ContainerStatus
		want     string
	}{
		{"no statuses yet: placed (the node sees the container is not running)", nil, "p:main-livenessProbe@main,side-livenessProbe@side"},
		{"both started", []corev1.ContainerStatus{{Name: "main", Started: &yes}, {Name: "side", Started: &yes}},
			"p:main-livenessProbe@main,side-livenessProbe@side"},
		{"startup probe of main not passed yet", []corev1.ContainerStatus{{Name: "main", Started: &no}, {Name: "side", Started: &yes}},
			"p:side-livenessProbe@side"},
		{"started unknown (nil)", []corev1.ContainerStatus{{Name: "main"}, {Name: "side", Started: &yes}}, "p:side-livenessProbe@side"},
		{"none started", []corev1.ContainerStatus{{Name: "main", Started: &no}, {Name: "side", Started: &no}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := withStartupProbes(livenessPod(t, "ns", "p", "n", httpLiveness("main", "http"), httpLiveness("side", "9090")))
			pod.Status.ContainerStatuses = tc.statuses
			got, skipped := desiredEntries([]corev1.Pod{*pod})
			if r := render(got); r != tc.want || len(skipped) != 0 {
				t.Errorf("entries = %q (skipped %v), want %q", r, skipped, tc.want)
			}
			// Without startup probes nothing waits.
			pod = livenessPod(t, "ns", "p", "n", httpLiveness("main", "http"), httpLiveness("side", "9090"))
			pod.Status.ContainerStatuses = tc.statuses
			got, _ = desiredEntries([]corev1.Pod{*pod})
			if r, all := render(got), "p:main-livenessProbe@main,side-livenessProbe@side"; r != all {
				t.Errorf("without startup probes: entries = %q, want %q", r, all)
			}
		})
	}
	// A sidecar (restartable init container) not started yet.
	always := corev1.ContainerRestartPolicyAlways
	pod := livenessPod(t, "ns", "p", "n", httpLiveness("main", "http"), httpLiveness("proxy", "9090"))
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "busybox", RestartPolicy: &always}}
	pod = withStartupProbes(pod)
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", Started: &no}}
	if got, _ := desiredEntries([]corev1.Pod{*pod}); render(got) != "p:main-livenessProbe@main" {
		t.Errorf("sidecar not started: entries = %q", render(got))
	}
}

func spec(node string) (string, error) {
	npp := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, npp); err != nil {
		return "", err
	}
	return render(npp.Spec.PodProbes), nil
}

func specIs(node, want string) func() error {
	return func() error {
		got, err := spec(node)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("spec = %q, want %q", got, want)
		}
		return nil
	}
}

func run(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod.UID = ""
	status := pod.Status
	pod.Status = corev1.PodStatus{}
	created := env.RunningPod(t, pod, status.PodIP)
	return created
}

func TestLivenessEntriesFollowPods(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := testenv.Name("node")
	// The NodePodProbe comes from the marker mapping; here the test makes it, with a marker
	// entry that must survive every liveness reconcile.
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{
		Name: "other", Namespace: ns, UID: "uid-other", IP: "10.9.0.9", Probes: []v1alpha1.ContainerProbe{{Name: "m#idle", ContainerName: "main",
			Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}}}}}}
	if err := env.Client.Create(ctx, npp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, npp) })

	a := livenessPod(t, ns, "a", node, httpLiveness("main", "http"))
	a.Spec.Containers[0].StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	a = run(t, a)
	poll.Eventually(t, wait, specIs(node, "a:main-livenessProbe@main other:m#idle@main"))

	// The kubelet reports main not started (restarted, startup probe pending): the entry goes,
	// and comes back once it has started.
	setStarted := func(started bool) {
		t.Helper()
		// The controller writes the pod's LivenessProtected condition meanwhile: read again on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
				return err
			}
			cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "busybox", Started: &started,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
			return env.Client.Status().Update(ctx, cur)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setStarted(false)
	poll.Eventually(t, wait, specIs(node, "other:m#idle@main"))
	setStarted(true)
	poll.Eventually(t, wait, specIs(node, "a:main-livenessProbe@main other:m#idle@main"))
	got := &v1alpha1.NodePodProbe{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: node}, got); err != nil {
		t.Fatal(err)
	}
	if pp := got.Spec.PodProbes[0]; pp.UID != string(a.UID) || pp.IP != "10.9.0.1" || pp.Probes[0].Probe.HTTPGet.Port != intstr.FromInt32(8080) {
		t.Fatalf("entry = %+v", pp)
	}

	// A plain pod, and one that opted in without liveness probes: nothing.
	plain := livenessPod(t, ns, "plain", node)
	delete(plain.Annotations, v1alpha1.AnnotationUsingEnhancedLiveness)
	run(t, plain)
	b := run(t, livenessPod(t, ns, "b", node, httpLiveness("main", "http"), httpLiveness("side", "9090")))
	poll.Eventually(t, wait, specIs(node, "a:main-livenessProbe@main b:main-livenessProbe@main,side-livenessProbe@side other:m#idle@main"))

	env.ForceDelete(t, a)
	poll.Eventually(t, wait, specIs(node, "b:main-livenessProbe@main,side-livenessProbe@side other:m#idle@main"))
	env.ForceDelete(t, b)
	poll.Eventually(t, wait, specIs(node, "other:m#idle@main"))
}

func TestBadProbeContextIsReportedOnThePod(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := testenv.Name("node")
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := env.Client.Create(ctx, npp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, npp) })
	pod := livenessPod(t, ns, "a", node, httpLiveness("main", "metrics"))
	run(t, pod)
	poll.Eventually(t, wait, func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == EventReasonProbeSkipped && e.Regarding.Name == "a" {
				if want := `enhanced liveness probe not placed: liveness probe of container "main": httpGet: container "main" has no port named "metrics"`; e.Note != want {
					return fmt.Errorf("note %q, want %q", e.Note, want)
				}
				return nil
			}
		}
		return errors.New("no event on the pod")
	})
	if s, _ := spec(node); s != "" {
		t.Fatalf("spec = %q, want empty", s)
	}
}

// A running pod whose liveness probes were moved says whether anything runs them, for as long as
// that lasts: no node service on its node, then a live one, then a silent one; a pod whose probes
// could not be placed says so whatever the node.
func TestLivenessProtectedCondition(t *testing.T) {
	testenv.Require(t, env, skipReason)
	ns := env.Namespace(t)
	node := testenv.Name("node")
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node,
		Annotations: map[string]string{v1alpha1.AnnotationNodeService: v1alpha1.NodeServiceNoLease}}}
	if err := env.Client.Create(ctx, npp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, npp) })
	record := func(state, since string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`, v1alpha1.AnnotationNodeService, state,
			v1alpha1.AnnotationNodeServiceSince, since)
		if err := env.Client.Patch(ctx, &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node}},
			client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	protected := func(p *corev1.Pod, status corev1.ConditionStatus, reason, msg string) {
		t.Helper()
		poll.Eventually(t, wait, func() error {
			cur := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
				return err
			}
			for _, c := range cur.Status.Conditions {
				if c.Type == ConditionLivenessProtected {
					if c.Status != status || c.Reason != reason || !strings.Contains(c.Message, msg) {
						return fmt.Errorf("%s %s %s %q, want %s %s %q", c.Type, c.Status, c.Reason, c.Message, status, reason, msg)
					}
					return nil
				}
			}
			return fmt.Errorf("no condition %s: %+v", ConditionLivenessProtected, cur.Status.Conditions)
		})
	}
	event := func(p *corev1.Pod, reason, text string) {
		t.Helper()
		poll.Eventually(t, wait, func() error {
			var list eventsv1.EventList
			if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, e := range list.Items {
				if e.Regarding.Name == p.Name && e.Reason == reason && strings.Contains(e.Note, text) {
					return nil
				}
			}
			return fmt.Errorf("no %s event on %s with %q", reason, p.Name, text)
		})
	}

	a := run(t, livenessPod(t, ns, "a", node, httpLiveness("main", "http")))
	protected(a, corev1.ConditionFalse, ReasonNoNodeService, "no probeshim node service renews its heartbeat on node "+node)
	event(a, EventReasonUnprotected, "no probeshim node service")

	record(v1alpha1.NodeServiceLive, "2026-12-03T10:00:00Z")
	protected(a, corev1.ConditionTrue, ReasonNodeServiceLive, "runs the pod's liveness probes")
	event(a, EventReasonProtected, "runs the pod's liveness probes")

	// A pod that arrives after the service went silent is told as well.
	record(v1alpha1.NodeServiceSilent, "2026-12-03T10:05:00Z")
	protected(a, corev1.ConditionFalse, ReasonNodeServiceSilent, "is silent since 2026-12-03T10:05:00Z")
	b := run(t, livenessPod(t, ns, "b", node, httpLiveness("main", "http")))
	protected(b, corev1.ConditionFalse, ReasonNodeServiceSilent, "nothing restarts a hung container")

	record(v1alpha1.NodeServiceLive, "2026-12-03T10:06:00Z")
	bad := run(t, livenessPod(t, ns, "bad", node, httpLiveness("ghost", "http")))
	protected(bad, corev1.ConditionFalse, ReasonProbeNotPlaced, `names container "ghost"`)
	protected(b, corev1.ConditionTrue, ReasonNodeServiceLive, "")
}
