// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package decider is the end-to-end suite of the liveness decider (cluster/decider): the cluster
// deployment from cluster/deploy and the node service on the rig, enhanced-liveness pods whose
// probes are made to fail, and the ContainerRecreateRequests the decider creates (or holds back)
// watched from the start.
package decider

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
)

func TestMain(m *testing.M) {
	// The scenarios wait on probes, the decider and the kubelet more than on the CPU, but their
	// pods' exec probes (one a second each) are not free: all seven default-configuration
	// scenarios at once (about 40 pods) starved a 2-core machine until healthy pods' probes timed
	// out, so four run at a time. -parallel on the command line wins.
	_ = flag.Set("test.parallel", "4")
	logf.SetLogger(logr.Discard())
	framework.Main(m, framework.WithScheme(v1alpha1.AddToScheme), framework.WithImages(cluster.Image()))
}

// suite is the deployed cluster part, the node service and the request log, shared by the
// scenarios.
type suite struct {
	c    *framework.Cluster
	svc  *framework.NodeService
	crrs *crrLog
	mon  *monitoring
	// defaultConfig is the decider's configuration as cluster/deploy ships it.
	defaultConfig string
}

// setup deploys the cluster part, starts the node service and the request log, and waits for
// the decider to have read its configuration.
func setup(t testing.TB) *suite {
	t.Helper()
	c := framework.Get(t)
	t0 := time.Now()
	if err := cluster.Deploy(framework.Context(t, 4*time.Minute), c, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster deployment ready in %s", time.Since(t0).Round(time.Millisecond))
	doc, err := shippedConfig()
	if err != nil {
		t.Fatal(err)
	}
	crrs, err := watchRequests(framework.Context(t, time.Hour), c)
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{c: c, svc: c.StartNodeService(t), crrs: crrs, defaultConfig: doc}
	c.WaitForServed(t, c.Rig.NodeName()) // enhanced-liveness pods are scheduled only onto served nodes
	s.mon = s.startMonitoring(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster deployment:\n%s", cluster.Diagnose(c))
		}
	})
	err = framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, "the decider to load its configuration", func(ctx context.Context) (bool, string, error) {
		n, err := s.configLoads(ctx, time.Time{})
		return n > 0, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDecider runs the scenarios of the default configuration at once, each in namespaces of its
// own, then those that change the configuration one after another, then the failover.
func TestDecider(t *testing.T) {
	s := setup(t)
	t.Run("default config", func(t *testing.T) {
		t.Run("one pod fails", s.testOnePod)
		t.Run("probe misconfigured for all pods", s.testBreaker)
		t.Run("disruption budget", s.testBudget)
		t.Run("two disruption budgets over one pod", s.testTwoBudgets)
		t.Run("opt-outs", s.testOptOuts)
		t.Run("keeps failing", s.testBackoff)
		t.Run("startup hold", s.testStartupHold)
		t.Run("an exit is not a failed probe", s.testExit)
	})
	t.Run("global switch off", s.testSwitchOff)
	t.Run("invalid config", s.testInvalidConfig)
	t.Run("metrics need a token", s.testMetricsAuth)
	t.Run("monitoring", s.testMonitoring)
	t.Run("blacklist", s.testBlacklist)
	t.Run("dry run", s.testDryRun)
	t.Run("rate limit", s.testRateLimit)
	t.Run("an exit under a zero observation window", s.testExitZeroWindow)
	t.Run("failover", s.testFailover)

	cluster.CheckNoPanics(t, s.c, s.svc)
}

// One pod of six fails its liveness probe: exactly its container is restarted, once, through a
// request the decider creates and deletes again; the probe recovers.
func (s *suite) testOnePod(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pods := s.deployment(t, appPod(ns, "web", true, livenessProbe(failMarker)), 6)
	target := pods[2]
	s.fail(t, target, failMarker)

	got := s.waitCreated(t, target, 1, waitRestart)
	checkRequest(t, got[0], target)
	s.waitRestarts(t, target, 1, waitRestart)
	s.waitProbe(t, target, v1alpha1.ProbeSucceeded)
	s.waitEvent(t, target, decider.EventReasonRestart, got[0].crr.Name, 30*time.Second)
	s.waitAllDeleted(t, ns, time.Minute)

	if all := s.crrs.created(ns, ""); len(all) != 1 {
		t.Errorf("%d requests in %s, want exactly 1: %s", len(all), ns, s.crrs.describe(ns))
	}
	p := s.pod(t, target)
	if rec := record(t, p); rec.Containers[appContainer].Restarts != 1 || rec.Request != "" {
		t.Errorf("record %s = %+v, want 1 restart of %s and no request in flight", decider.AnnotationRestarts, rec, appContainer)
	}
	for _, o := range pods {
		if o.Name != target.Name {
			if n := restarts(s.pod(t, o)); n != 0 {
				t.Errorf("pod %s, which did not fail, has restartCount %d\n%s", o.Name, n, s.explain(o))
			}
		}
	}
}

// The same Deployment twice, with a liveness probe that fails on every pod from the start: under
// the decider the circuit breaker holds every restart and the events say why; under the kubelet
// every pod is restarted. A readiness delay keeps the pods unready while their probes start
// failing (as a real service's warm-up would), so the budget holds the first failures until
// enough fail for the breaker to open; then the pods turn Ready and only the breaker holds.
func (s *suite) testBreaker(t *testing.T) {
	t.Parallel()
	nsDecider, nsKubelet := s.c.Namespace(t), s.c.Namespace(t)
	// The wrong port: nothing listens there.
	bad := &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(appPort + 1)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1,
	}
	warmUp := &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(appPort)}},
		InitialDelaySeconds: 20, PeriodSeconds: 2,
	}
	tmpl := func(ns string, enhanced bool) *corev1.Pod {
		p := appPod(ns, "web", enhanced, bad.DeepCopy())
		p.Spec.Containers[0].ReadinessProbe = warmUp.DeepCopy()
		return p
	}
	t0 := time.Now()
	s.createDeployment(t, tmpl(nsDecider, true), 6)
	s.createDeployment(t, tmpl(nsKubelet, false), 6)

	// Every pod turns Ready (the readiness delay is over) and is held by the breaker.
	pods := s.waitWorkload(t, nsDecider, "web", 6, false)
	for _, p := range pods {
		ev := s.waitHeld(t, p, decider.ReasonCircuitBreakerOpen, waitRestart)
		if !strings.Contains(ev.Message, "of its 6 pods fail liveness at once") {
			t.Errorf("the held event of %s does not say how many pods fail: %q", p.Name, ev.Message)
		}
	}
	s.checkMetric(t, "probeshim_decider_circuit_breakers_open", func(v float64) bool { return v >= 1 }, "at least 1")
	s.waitAlert(t, "ProbeshimCircuitBreakerOpen", "firing", time.Minute) // resolves in "monitoring"
	// The decider decides again with every pod Ready (the breaker is all that holds now): one
	// pod's emergency switch is a change it reports, after deciding the whole workload anew.
	s.annotatePod(t, pods[0], decider.AnnotationRestartDisabled, "true")
	s.waitHeld(t, pods[0], decider.ReasonPodOptedOut, waitRestart)

	// The kubelet meanwhile restarts every one of its pods.
	native := s.waitAllRestarted(t, nsKubelet, "web", 6, 90*time.Second)
	window := time.Since(t0)

	var deciderRestarts, kubeletRestarts, kubeletPods int32
	var reasons []string
	for _, p := range pods {
		cur := s.pod(t, p)
		deciderRestarts += restarts(cur)
		reasons = append(reasons, fmt.Sprintf("%s %v", p.Name, s.heldReasons(t, p)))
	}
	for _, p := range native {
		kubeletRestarts += restarts(p)
		if restarts(p) > 0 {
			kubeletPods++
		}
	}
	requests := len(s.crrs.created(nsDecider, ""))
	t.Logf("misconfigured probe on 6 pods, %s from creation: kubelet restarted %d of 6 pods (%d restarts in all); "+
		"decider restarted %d (%d requests). Held reasons per pod: %s",
		window.Round(time.Second), kubeletPods, kubeletRestarts, deciderRestarts, requests, strings.Join(reasons, "; "))
	s.noRequests(t, nsDecider, "")
	if deciderRestarts != 0 {
		t.Errorf("the decider's pods were restarted %d times, want none", deciderRestarts)
	}
}

// Three of six pods fail, under a PodDisruptionBudget of maxUnavailable 1: never more than one
// request at a time, all three restarted in turn, the others wait for the budget and say so.
func (s *suite) testBudget(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pods := s.deployment(t, appPod(ns, "web", true, livenessProbe(failMarker)), 6)
	s.createPDB(t, ns, "web", 1)
	ready := s.watchReady(t, ns)
	failing := pods[:3]
	s.failAll(t, failing, failMarker)

	s.checkPaced(t, ns, failing, pods[3:], ready)
	evs, err := s.c.Kube.CoreV1().Events(ns).List(framework.Context(t, time.Minute), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	budget := false
	unhealthy, killing := map[string]bool{}, map[string]bool{}
	for _, e := range evs.Items {
		if e.Reason == decider.EventReasonHeld && strings.Contains(e.Message, "(MaxUnavailable)") &&
			strings.Contains(e.Message, "PodDisruptionBudget "+ns+"/web") {
			budget = true
		}
		// The node service tells a failing enhanced liveness probe as the kubelet would, and the
		// restart with the decider's why.
		if e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, "Liveness probe failed: ") && e.InvolvedObject.FieldPath == "spec.containers{app}" {
			unhealthy[e.InvolvedObject.Name] = true
		}
		if e.Reason == "Killing" && strings.HasPrefix(e.Message, "Container app failed liveness probe, will be restarted; decider: budget ok: PodDisruptionBudget "+ns+"/web allows") {
			killing[e.InvolvedObject.Name] = true
		}
	}
	if !budget {
		t.Errorf("no %s event names the budget (MaxUnavailable, PodDisruptionBudget %s/web); events:\n%s", decider.EventReasonHeld, ns, framework.FormatEvents(evs.Items))
	}
	for _, p := range failing {
		if !unhealthy[p.Name] {
			t.Errorf("no Unhealthy event \"Liveness probe failed: ...\" on %s's container app; events:\n%s", p.Name, framework.FormatEvents(evs.Items))
		}
		if !killing[p.Name] {
			t.Errorf("no Killing event \"Container app failed liveness probe, will be restarted; decider: budget ok: ...\" on %s; events:\n%s", p.Name, framework.FormatEvents(evs.Items))
		}
	}
}

// Two PodDisruptionBudgets select one failing pod, each counted by the real disruption
// controller and allowing a disruption: the decider holds the restart as the eviction API
// refuses such a pod (MultipleBudgets), says so on the pod, and creates no request.
func (s *suite) testTwoBudgets(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	pods := s.deployment(t, appPod(ns, "shop", true, livenessProbe(failMarker)), 4)
	s.createPDB(t, ns, "shop", 1)
	second := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-too"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
	}
	if err := s.c.Client.Create(framework.Context(t, time.Minute), second); err != nil {
		t.Fatal(err)
	}
	s.fail(t, pods[0], failMarker)
	ev, err := s.c.WaitForEvent(framework.Context(t, 2*time.Minute), ns, pods[0].Name, decider.EventReasonHeld, "("+string(decider.ReasonMultipleBudgets)+")", waitRestart)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ev.Message, ns+"/shop, "+ns+"/shop-too") {
		t.Errorf("the hold does not name both budgets: %q", ev.Message)
	}
	p, err := s.c.WaitForPod(framework.Context(t, time.Minute), ns, pods[0].Name, 30*time.Second, "condition "+string(decider.ConditionLivenessRestart)+" MultipleBudgets",
		func(p *corev1.Pod) bool {
			for _, c := range p.Status.Conditions {
				if c.Type == decider.ConditionLivenessRestart {
					return c.Status == corev1.ConditionFalse && c.Reason == string(decider.ReasonMultipleBudgets)
				}
			}
			return false
		})
	if err != nil {
		t.Error(err)
	} else if n := restarts(p); n != 0 {
		t.Errorf("%s restarted %d times under two budgets", p.Name, n)
	}
	if got := s.crrs.created(ns, pods[0].Name); len(got) != 0 {
		t.Errorf("%d requests for %s under two budgets", len(got), pods[0].Name)
	}
}

// checkOneEach wants exactly one request and one restart for each of failing, none for the
// others, and the decider's record to count one restart with nothing in flight.
func (s *suite) checkOneEach(t *testing.T, ns string, failing, others []*corev1.Pod) {
	t.Helper()
	for _, p := range failing {
		got := s.crrs.created(ns, p.Name)
		if len(got) != 1 {
			t.Errorf("%d requests for %s, want 1: %s", len(got), p.Name, s.crrs.describe(ns))
		} else {
			checkRequest(t, got[0], p)
		}
		cur := s.pod(t, p)
		if n := restarts(cur); n != 1 {
			t.Errorf("pod %s: restartCount %d, want 1", p.Name, n)
		}
		if rec := record(t, cur); rec.Containers[appContainer].Restarts != 1 || rec.Request != "" {
			t.Errorf("pod %s: record %+v, want 1 restart and no request in flight", p.Name, rec)
		}
	}
	for _, p := range others {
		if n := restarts(s.pod(t, p)); n != 0 {
			t.Errorf("pod %s, which did not fail, has restartCount %d\n%s", p.Name, n, s.explain(p))
		}
	}
	if all := s.crrs.created(ns, ""); len(all) != len(failing) {
		t.Errorf("%d requests in %s, want %d: %s", len(all), ns, len(failing), s.crrs.describe(ns))
	}
}

// The emergency switch on a pod and the opt-out of a namespace hold the restart and say so;
// switched back, the failing container is restarted.
func (s *suite) testOptOuts(t *testing.T) {
	t.Parallel()
	nsOff, ns := s.c.Namespace(t), s.c.Namespace(t)
	s.annotateNamespace(t, nsOff, "true")
	inOff := s.barePod(t, appPod(nsOff, "a", true, livenessProbe(failMarker)))
	p := appPod(ns, "b", true, livenessProbe(failMarker))
	p.Annotations[decider.AnnotationRestartDisabled] = "true"
	optedOut := s.barePod(t, p)

	s.failAll(t, []*corev1.Pod{inOff, optedOut}, failMarker)
	ev := s.waitHeld(t, inOff, decider.ReasonNamespaceOptedOut, waitRestart)
	t.Logf("namespace opt-out: %s", ev.Message)
	ev = s.waitHeld(t, optedOut, decider.ReasonPodOptedOut, waitRestart)
	t.Logf("pod opt-out: %s", ev.Message)
	s.noRequests(t, nsOff, "")
	s.noRequests(t, ns, "")
	for _, p := range []*corev1.Pod{inOff, optedOut} {
		if n := restarts(s.pod(t, p)); n != 0 {
			t.Errorf("pod %s restarted %d times while opted out", p.Name, n)
		}
	}

	// Switched back: restarted.
	s.annotateNamespace(t, nsOff, "")
	s.annotatePod(t, optedOut, decider.AnnotationRestartDisabled, "")
	for _, p := range []*corev1.Pod{inOff, optedOut} {
		s.waitCreated(t, p, 1, waitRestart)
		s.waitRestarts(t, p, 1, waitRestart)
	}
}

// A container that keeps failing (the marker is on an emptyDir) is restarted again and again,
// with a growing wait between the restarts (the backoff), not in a loop.
func (s *suite) testBackoff(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	p := appPod(ns, "sticky", true, livenessProbe(stickyMarker))
	withStickyMarker(p)
	pod := s.barePod(t, p)
	s.fail(t, pod, stickyMarker)

	// Default backoff: the first restart at once, the next after 10 s, then 20 s.
	got := s.waitCreated(t, pod, 3, 3*waitRestart)
	// No fourth (40 s after the third): the emergency switch at once, an API write, holds it.
	// Healing first raced it: the exec waits for the third restart, which a loaded machine has
	// taken 36 s to finish. The switch holds new restarts only; the third goes on.
	s.annotatePod(t, pod, decider.AnnotationRestartDisabled, "true")
	err := framework.WaitFor(framework.Context(t, 2*time.Minute), time.Minute, "removing the marker", func(ctx context.Context) (bool, string, error) {
		_, _, err := s.c.Exec(ctx, ns, pod.Name, appContainer, "rm", "-f", stickyMarker)
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitProbe(t, pod, v1alpha1.ProbeSucceeded)
	s.waitAllDeleted(t, ns, time.Minute)

	gaps := []time.Duration{got[1].at.Sub(got[0].at), got[2].at.Sub(got[1].at)}
	t.Logf("a container that keeps failing: restarts %s apart (backoff 10s, then 20s)", strings.Join(roundAll(gaps), ", "))
	// The backoff counts from the start of the decision (the reconcile's clock); each request is
	// created after the decider wrote its record, which takes up to a second or two on a loaded
	// machine: so a gap may fall that much short of the backoff, and exceed it by the probe's and
	// the decider's reaction (seconds, room for load).
	if gaps[0] < 8*time.Second || gaps[0] > 40*time.Second {
		t.Errorf("second restart %s after the first, want the 10s backoff (8s-40s: without a backoff it would be about 2s)", gaps[0])
	}
	if gaps[1] < 17*time.Second || gaps[1] > 60*time.Second {
		t.Errorf("third restart %s after the second, want the doubled 20s backoff (17s-60s)", gaps[1])
	}
	// The growth shows only when the first gap was the backoff's: on a loaded machine the first
	// restart (the request, the kubelet, its status) can outlast the 10 s, and then the first
	// gap is the restart's length. Asserted when the first restart was done with 5 s of its
	// backoff left, room enough for the new instance's failure (period 1 s) to reach the decider.
	firstEnd := got[0].at.Add(10 * time.Second)
	if done := s.crrs.completedAt(ns, got[0].crr.Name); !done.IsZero() && firstEnd.Sub(done) >= 5*time.Second {
		if gaps[1] <= gaps[0] {
			t.Errorf("the wait did not grow: %v (first restart done %s before its backoff ended)",
				roundAll(gaps), firstEnd.Sub(done).Round(10*time.Millisecond))
		}
	} else if !done.IsZero() {
		t.Logf("first restart done %s after its request: the first gap is the restart's length, not the backoff; growth not compared",
			done.Sub(got[0].at).Round(10*time.Millisecond))
	} else {
		t.Errorf("the first request %s was never seen completed: %s", got[0].crr.Name, s.crrs.describe(ns))
	}
	// The hold is visible only when the restarted container fails again while its backoff lasts:
	// on a loaded machine the restart itself (the request, the kubelet, its status) can outlast
	// the 10 s. The second backoff (20 s) is asserted when its restart was done with 10 s of it
	// left, room enough for the new instance's failure to reach the decider.
	backoffEnd := got[1].at.Add(20 * time.Second)
	done := s.crrs.completedAt(ns, got[1].crr.Name)
	reasons := s.heldReasons(t, pod)
	t.Logf("second restart done %s after its request, its backoff ends %s after; held reasons %v",
		done.Sub(got[1].at).Round(10*time.Millisecond), backoffEnd.Sub(done).Round(10*time.Millisecond), reasons)
	if !containsStr(reasons, string(decider.ReasonBackoff)) {
		if !done.IsZero() && backoffEnd.Sub(done) >= 10*time.Second {
			t.Errorf("no held event with reason Backoff although the second restart was done %s before its backoff ended; held reasons: %v\n%s",
				backoffEnd.Sub(done).Round(10*time.Millisecond), reasons, s.crrs.describe(ns))
		}
	}
	cur := s.pod(t, pod)
	if n := restarts(cur); n != 3 {
		t.Errorf("restartCount %d, want 3", n)
	}
	if rec := record(t, cur); rec.Containers[appContainer].Restarts != 3 {
		t.Errorf("record %+v, want 3 restarts", rec)
	}
	if n := len(s.crrs.created(ns, pod.Name)); n != 3 {
		t.Errorf("%d requests, want 3: %s", n, s.crrs.describe(ns))
	}
}

// enabled: false holds every restart (reason Disabled); switched on again, the failing
// container is restarted.
func (s *suite) testSwitchOff(t *testing.T) {
	ns := s.c.Namespace(t)
	pod := s.barePod(t, appPod(ns, "a", true, livenessProbe(failMarker)))
	s.withConfig(t, s.config(t, "enabled: false"))
	s.fail(t, pod, failMarker)
	ev := s.waitHeld(t, pod, decider.ReasonDisabled, waitRestart)
	t.Logf("switched off: %s", ev.Message)
	s.noRequests(t, ns, "")

	s.setConfig(t, s.defaultConfig)
	s.waitCreated(t, pod, 1, waitRestart)
	s.waitRestarts(t, pod, 1, waitRestart)
}

// A configuration the decider cannot read holds every restart (reason ConfigInvalid) and says
// so in the metric; fixed, the failing container is restarted.
func (s *suite) testInvalidConfig(t *testing.T) {
	ns := s.c.Namespace(t)
	pod := s.barePod(t, appPod(ns, "a", true, livenessProbe(failMarker)))
	s.withConfig(t, s.config(t, "rateLimit: {qps: 0}"))
	s.fail(t, pod, failMarker)
	ev := s.waitHeld(t, pod, decider.ReasonConfigInvalid, waitRestart)
	t.Logf("invalid configuration: %s", ev.Message)
	if !strings.Contains(ev.Message, "rateLimit.qps") {
		t.Errorf("the event does not name the bad field rateLimit.qps: %q", ev.Message)
	}
	s.checkMetric(t, "probeshim_decider_config_valid", func(v float64) bool { return v == 0 }, "0")
	s.noRequests(t, ns, "")

	s.setConfig(t, s.defaultConfig)
	s.waitCreated(t, pod, 1, waitRestart)
	s.waitRestarts(t, pod, 1, waitRestart)
	s.checkMetric(t, "probeshim_decider_config_valid", func(v float64) bool { return v == 1 }, "1")
}

// checkMetric wants the leader's sample name (with its labels) to satisfy ok.
func (s *suite) checkMetric(t testing.TB, name string, ok func(float64) bool, want string) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	leader, err := s.leader(ctx)
	if err != nil {
		t.Error(err)
		return
	}
	v, found, err := s.metric(ctx, leader.Name, name)
	if err != nil || !found || !ok(v) {
		t.Errorf("%s on the leader %s = %v (found %t, %v), want %s", name, leader.Name, v, found, err, want)
	}
}

// The blacklist by namespace, selector and workload holds the restarts of what it names, each
// with its own message, and nothing else: a pod beside them is restarted.
func (s *suite) testBlacklist(t *testing.T) {
	nsListed, ns := s.c.Namespace(t), s.c.Namespace(t)
	inListed := appPod(nsListed, "a", true, livenessProbe(failMarker))
	selected := appPod(ns, "b", true, livenessProbe(failMarker))
	selected.Labels["tier"] = "fragile"
	free := appPod(ns, "free", true, livenessProbe(failMarker))
	pods := []*corev1.Pod{s.barePod(t, inListed), s.barePod(t, selected), s.barePod(t, free)}
	legacy := s.deployment(t, appPod(ns, "legacy", true, livenessProbe(failMarker)), 2)
	s.withConfig(t, s.config(t, fmt.Sprintf("blacklist: {namespaces: [%s], selectors: [\"tier=fragile\"], workloads: [Deployment/%s/legacy]}", nsListed, ns)))

	s.failAll(t, append(pods, legacy[0]), failMarker)
	for _, c := range []struct {
		pod  *corev1.Pod
		says string
	}{
		{pods[0], "namespace " + nsListed + " is on the blacklist"},
		{pods[1], `the blacklist selector "tier=fragile" selects the pod`},
		{legacy[0], "workload Deployment/" + ns + "/legacy is on the blacklist"},
	} {
		s.waitEvent(t, c.pod, decider.EventReasonHeld, c.says, waitRestart)
	}
	s.waitCreated(t, pods[2], 1, waitRestart)
	s.waitRestarts(t, pods[2], 1, waitRestart)
	s.noRequests(t, nsListed, "")
	s.noRequests(t, ns, pods[1].Name)
	s.noRequests(t, ns, legacy[0].Name)

	// Healed before the configuration is restored, so nothing is restarted then.
	for _, p := range []*corev1.Pod{pods[0], pods[1], legacy[0]} {
		s.heal(t, p)
	}
}

// dryRun decides and reports but creates nothing.
func (s *suite) testDryRun(t *testing.T) {
	ns := s.c.Namespace(t)
	pod := s.barePod(t, appPod(ns, "a", true, livenessProbe(failMarker)))
	s.withConfig(t, s.config(t, "dryRun: true"))
	s.fail(t, pod, failMarker)
	ev := s.waitEvent(t, pod, decider.EventReasonDryRun, "", waitRestart)
	t.Logf("dry run: %s", ev.Message)
	s.noRequests(t, ns, "")
	if n := restarts(s.pod(t, pod)); n != 0 {
		t.Errorf("restartCount %d in a dry run", n)
	}
	if rec := record(t, s.pod(t, pod)); len(rec.Containers) != 0 || rec.Request != "" {
		t.Errorf("a dry run left a record: %+v", rec)
	}
	s.checkMetric(t, `probeshim_decider_decisions_total{outcome="dry_run",reason="LivenessFailed"}`, func(v float64) bool { return v >= 1 }, "at least 1")
	s.heal(t, pod)
}

// Many pods of different workloads fail at once under a rate limit of 1 per second (burst 2):
// the requests follow the token bucket, and the pods waiting for a token say so.
func (s *suite) testRateLimit(t *testing.T) {
	const qps, burst = 1.0, 2
	ns := s.c.Namespace(t)
	var targets []*corev1.Pod
	for _, name := range []string{"web", "api"} {
		targets = append(targets, s.deployment(t, appPod(ns, name, true, livenessProbe(failMarker)), 3)[0])
	}
	for i := range 4 {
		targets = append(targets, s.barePod(t, appPod(ns, fmt.Sprintf("job-%d", i), true, livenessProbe(failMarker))))
	}
	s.withConfig(t, s.config(t, fmt.Sprintf("rateLimit: {qps: %v, burst: %d}", qps, burst)))
	s.failAll(t, targets, failMarker)

	for _, p := range targets {
		s.waitRestarts(t, p, 1, 2*waitRestart)
	}
	s.waitAllDeleted(t, ns, time.Minute)
	created := s.crrs.created(ns, "")
	if len(created) != len(targets) {
		t.Fatalf("%d requests, want %d: %s", len(created), len(targets), s.crrs.describe(ns))
	}
	var gaps []time.Duration
	for i := 1; i < len(created); i++ {
		gaps = append(gaps, created[i].at.Sub(created[i-1].at))
	}
	t.Logf("%d requests across %d workloads at qps %v burst %d: %s apart (first to last %s)", len(created), len(targets), qps, burst,
		strings.Join(roundAll(gaps), ", "), created[len(created)-1].at.Sub(created[0].at).Round(10*time.Millisecond))
	// A token bucket lets at most burst + qps*T requests through in any T. The tokens are taken
	// at the start of a decision and each request is created after the record is written, which
	// takes tens to hundreds of milliseconds on a loaded machine: 400 ms of room for that
	// jitter (without the limit all six would come within a fraction of a second).
	const jitter = 400 * time.Millisecond
	for i := range created {
		for j := i + burst; j < len(created); j++ {
			need := time.Duration(float64(j-i+1-burst) / qps * float64(time.Second))
			if got := created[j].at.Sub(created[i].at); got < need-jitter {
				t.Errorf("requests %d..%d (%d of them) within %s; the bucket allows that many no sooner than %s", i, j, j-i+1, got, need)
			}
		}
	}
	limited := 0
	for _, p := range targets {
		if containsStr(s.heldReasons(t, p), string(decider.ReasonRateLimited)) {
			limited++
		}
	}
	if limited == 0 {
		t.Errorf("no pod was held with reason RateLimited")
	}
	t.Logf("%d of %d pods were told they wait for the rate limit", limited, len(targets))
}

// The decider's leader is killed right after it created the first of three requests that the
// budget lets through one at a time: the other replica (or the restarted one) takes over,
// settles the request in flight from the record on the pod, creates no second request for it
// and restarts the other two in turn.
func (s *suite) testFailover(t *testing.T) {
	ns := s.c.Namespace(t)
	pods := s.deployment(t, appPod(ns, "web", true, livenessProbe(failMarker)), 6)
	s.createPDB(t, ns, "web", 1)
	ready := s.watchReady(t, ns)
	failing := pods[:3]
	s.failAll(t, failing, failMarker)

	err := framework.WaitFor(framework.Context(t, 2*time.Minute), waitRestart, "the first request", func(context.Context) (bool, string, error) {
		return len(s.crrs.created(ns, "")) > 0, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	killed, holder := s.crashLeader(t)
	crashed := time.Now()
	t.Logf("killed the leader %s right after %s was created", killed, s.crrs.created(ns, "")[0].crr.Name)

	var newHolder string
	err = framework.WaitFor(framework.Context(t, 2*time.Minute), 90*time.Second, "a new leader", func(ctx context.Context) (bool, string, error) {
		lease, err := s.c.Kube.CoordinationV1().Leases(cluster.Namespace).Get(ctx, cluster.Deployment, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		newHolder = leaseHolder(lease)
		return newHolder != "" && newHolder != holder, newHolder, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader %s after %s", newHolder, time.Since(crashed).Round(100*time.Millisecond))

	s.checkPaced(t, ns, failing, pods[3:], ready)
}

// checkPaced waits until each failing pod was restarted once and the requests are gone, and
// wants one request per failing pod, none for the healthy ones, never two active at once and
// never two pods unavailable at once.
func (s *suite) checkPaced(t *testing.T, ns string, failing, healthy []*corev1.Pod, ready *readyLog) {
	t.Helper()
	for _, p := range failing {
		s.waitRestarts(t, p, 1, 3*waitRestart)
	}
	s.waitAllDeleted(t, ns, time.Minute)
	s.checkOneEach(t, ns, failing, healthy)
	if most, at := s.crrs.maxActive(ns); most > 1 {
		t.Errorf("%d requests were active at once (%v), the budget allows 1: %s", most, at, s.crrs.describe(ns))
	}
	s.checkAvailability(t, ns, ready)
}

// checkAvailability wants no two pods of ns unavailable (not Ready, or with an active request)
// at once. Readiness and requests come through two watches, each a little late: an overlap of up
// to 500 ms is that skew; the decider starting a restart while the previous pod is still down
// would overlap for the seconds of a restart.
func (s *suite) checkAvailability(t *testing.T, ns string, ready *readyLog) {
	t.Helper()
	most, overlap, timeline := s.unavailable(ns, ready)
	t.Logf("pods unavailable (not Ready or being recreated) at once: at most %d, two or more for %s:%s", most, overlap, timeline)
	if overlap > 500*time.Millisecond {
		t.Errorf("two or more pods were unavailable at once for %s (the budget allows 1)", overlap)
	}
}

// ---- small actions ----

func (s *suite) annotatePod(t testing.TB, pod *corev1.Pod, key, value string) {
	t.Helper()
	s.patchAnnotation(t, func(ctx context.Context, patch []byte) error {
		_, err := s.c.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, key, value)
}

func (s *suite) annotateNamespace(t testing.TB, ns, value string) {
	t.Helper()
	s.patchAnnotation(t, func(ctx context.Context, patch []byte) error {
		_, err := s.c.Kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}, decider.AnnotationRestartDisabled, value)
}

// patchAnnotation sets key to value, or removes it when value is "".
func (s *suite) patchAnnotation(t testing.TB, apply func(context.Context, []byte) error, key, value string) {
	t.Helper()
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	if err := apply(framework.Context(t, 30*time.Second), []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, key, v))); err != nil {
		t.Fatal(err)
	}
}

// heal removes the marker and waits for the probe to succeed again.
func (s *suite) heal(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	if _, _, err := s.c.Exec(framework.Context(t, time.Minute), pod.Namespace, pod.Name, appContainer, "rm", "-f", failMarker); err != nil {
		t.Fatal(err)
	}
	s.waitProbe(t, pod, v1alpha1.ProbeSucceeded)
}

// waitAllRestarted waits until each of the n pods of app has been restarted at least once and
// returns them.
func (s *suite) waitAllRestarted(t testing.TB, ns, app string, n int, timeout time.Duration) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	err := framework.WaitFor(framework.Context(t, timeout+time.Minute), timeout, fmt.Sprintf("all %d pods of %s/%s restarted", n, ns, app),
		func(ctx context.Context) (bool, string, error) {
			list, err := s.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return false, err.Error(), nil
			}
			pods = pods[:0]
			restarted := 0
			var obs []string
			for i := range list.Items {
				pods = append(pods, &list.Items[i])
				if restarts(&list.Items[i]) > 0 {
					restarted++
				}
				obs = append(obs, framework.DescribePod(&list.Items[i]))
			}
			return len(pods) == n && restarted == n, strings.Join(obs, "; "), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
