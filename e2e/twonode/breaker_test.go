// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/e2e/framework"
)

// A Deployment of six pods spread three and three over the nodes, whose enhanced liveness probes
// all fail (a misconfigured probe): the decider's circuit breaker counts the failing pods of the
// workload on both nodes — more than one node has — and holds every restart.
func (s *suite) testBreaker(t *testing.T) {
	t.Parallel()
	ns := s.c.Namespace(t)
	const replicas = 6
	ctr := framework.Shell(appContainer, appScript)
	// The wrong port: nothing listens there.
	ctr.LivenessProbe = livenessProbe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(appPort + 1)}})
	// Ready only after a while: the breaker is then what holds the pods, not their readiness.
	ctr.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(appPort)}},
		InitialDelaySeconds: 20, PeriodSeconds: 1}
	tmpl := framework.NewPod(ns, "web", ctr)
	tmpl.Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}
	tmpl.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
	}}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec},
		},
	}
	ctx := framework.Context(t, 5*time.Minute)
	if err := s.c.Client.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}

	var pods []corev1.Pod
	err := framework.WaitFor(ctx, waitPodReady, fmt.Sprintf("%d pods of %s/web Ready", replicas, ns), func(ctx context.Context) (bool, string, error) {
		list, err := s.c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error(), nil
		}
		pods = list.Items
		ready := 0
		var obs []string
		for i := range pods {
			if framework.PodReady(&pods[i]) && pods[i].DeletionTimestamp == nil {
				ready++
			}
			obs = append(obs, pods[i].Name+" on "+pods[i].Spec.NodeName+": "+framework.DescribePod(&pods[i]))
		}
		return len(pods) == replicas && ready == replicas, strings.Join(obs, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int{}
	for _, p := range pods {
		perNode[p.Spec.NodeName]++
	}
	if perNode[s.a.Name()] != replicas/2 || perNode[s.b.Name()] != replicas/2 {
		t.Fatalf("pods per node %v, want %d on each of %s and %s", perNode, replicas/2, s.a.Name(), s.b.Name())
	}

	// Every pod is held by the breaker; the count in the messages is of the whole workload.
	failing := regexp.MustCompile(`(\d+) of its (\d+) pods fail liveness at once`)
	most := 0
	for i := range pods {
		p := &pods[i]
		ev, err := s.c.WaitForEvent(ctx, ns, p.Name, decider.EventReasonHeld, "("+string(decider.ReasonCircuitBreakerOpen)+")", waitRestart)
		if err != nil {
			t.Fatalf("%v\n%s", err, s.explain(p))
		}
		m := failing.FindStringSubmatch(ev.Message)
		if m == nil {
			t.Errorf("the held event of %s does not say how many pods fail: %q", p.Name, ev.Message)
			continue
		}
		if m[2] != strconv.Itoa(replicas) {
			t.Errorf("the held event of %s counts %s pods in the workload, want %d: %q", p.Name, m[2], replicas, ev.Message)
		}
		n, _ := strconv.Atoi(m[1])
		most = max(most, n)
	}
	if most <= replicas/2 {
		t.Errorf("at most %d failing pods counted at once, want more than the %d of one node", most, replicas/2)
	}
	// Both nodes report the failures the breaker counted.
	for _, p := range pods {
		npp, err := s.npp(ctx, p.Spec.NodeName)
		if err != nil {
			t.Fatal(err)
		}
		if st := probeState(npp, &p, livenessProbeName); st.State != v1alpha1.ProbeFailed {
			t.Errorf("pod %s on %s: liveness %q in its node's NodePodProbe, want Failed", p.Name, p.Spec.NodeName, st.State)
		}
	}
	var crrs v1alpha1.ContainerRecreateRequestList
	if err := s.c.Client.List(ctx, &crrs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(crrs.Items) > 0 {
		t.Errorf("%d ContainerRecreateRequests in %s, want none while the breaker is open", len(crrs.Items), ns)
	}
	for _, p := range pods {
		if n := restarts(s.pod(t, &p), appContainer); n != 0 {
			t.Errorf("pod %s on %s restarted %d times, want 0", p.Name, p.Spec.NodeName, n)
		}
	}
}
