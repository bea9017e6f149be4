// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/cluster/kruise"
	"github.com/probeshim/probeshim/cluster/plugin"
)

// status shows, from what the cluster part and node services record: served and unserved nodes
// with their Leases (and a Lease without a Node), who acts on each kind of work beside
// OpenKruise, the decider's switches and a breaker's hold on a pod whose liveness still fails
// (not one whose failure healed), and the markers with their counts; -o json and -o yaml carry the
// same; an invalid decider configuration is shouted.
func TestStatus(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	c := testEnv.c
	ns := namespace(t, "status-shop")
	sys := plugin.DefaultClusterNamespace
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: heartbeat.LeaseNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}

	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "st-served", Labels: map[string]string{v1alpha1.LabelNodeServed: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "st-silent"}},
	} {
		create(t, n)
	}
	now := testEnv.now
	for name, renewed := range map[string]time.Time{"st-served": now.Add(-5 * time.Second), "st-silent": now.Add(-10 * time.Minute), "st-gone": now.Add(-time.Hour)} {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: heartbeat.LeaseNamespace, Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: ptr.To(metav1.NewMicroTime(renewed))}}
		create(t, l)
	}

	tcp := v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"held", "healed"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: "st-served",
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: decider.ConditionLivenessRestart, Status: corev1.ConditionFalse,
			Reason: string(decider.ReasonCircuitBreakerOpen), LastTransitionTime: metav1.Now(),
			Message: "held of app: circuit breaker open for Deployment/" + ns + "/web: 3 of its 4 pods fail liveness at once"}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods[name] = p
	}
	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: "st-served", Annotations: map[string]string{
		v1alpha1.AnnotationNodeService: v1alpha1.NodeServiceLive, v1alpha1.AnnotationNodeServiceSince: "2026-12-03T10:00:00Z",
		v1alpha1.AnnotationProbesLate: "3 probes start 2s late: the exec runners are all busy"}},
		Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{
			{Name: "held", Namespace: ns, UID: string(pods["held"].UID), IP: "10.0.0.1", Probes: []v1alpha1.ContainerProbe{
				{Name: "app-livenessProbe", ContainerName: "app", Probe: tcp}, {Name: "web#tcp", ContainerName: "app", Probe: tcp}}},
			{Name: "healed", Namespace: ns, UID: string(pods["healed"].UID), IP: "10.0.0.2", Probes: []v1alpha1.ContainerProbe{
				{Name: "app-livenessProbe", ContainerName: "app", Probe: tcp}}}}}}
	create(t, npp)
	npp.Status.PodProbeStatuses = []v1alpha1.PodProbeStatus{
		{Name: "held", Namespace: ns, UID: string(pods["held"].UID), ProbeStates: []v1alpha1.ContainerProbeState{
			{Name: "app-livenessProbe", State: v1alpha1.ProbeFailed, LastProbeTime: metav1.Now()}}},
		{Name: "healed", Namespace: ns, UID: string(pods["healed"].UID), ProbeStates: []v1alpha1.ContainerProbeState{
			{Name: "app-livenessProbe", State: v1alpha1.ProbeSucceeded, LastProbeTime: metav1.Now()}}}}
	if err := c.Status().Update(ctx, npp); err != nil {
		t.Fatal(err)
	}

	obs, err := json.Marshal(kruise.Observation{Installed: true, Webhooks: []string{kruise.WebhookCRR}, HandedOver: []kruise.Work{kruise.WorkProbes}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: kruise.StatusConfigMap}, Data: map[string]string{"observation": string(obs)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: kruise.HandoverConfigMap}, Data: map[string]string{string(kruise.WorkProbes): `{"config":"c","webhook":"w"}`}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: sys, Name: decider.ConfigMapName}, Data: map[string]string{decider.ConfigKey: "dryRun: true\nblacklist:\n  namespaces: [kube-system]\n"}},
	} {
		create(t, cm)
	}

	// In dry run, with the counts the cluster part writes (package nodepodprobe).
	ppm := &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Annotations: map[string]string{
		v1alpha1.AnnotationDryRun:          "true",
		v1alpha1.AnnotationResults:         `{"tcp":{"Succeeded":1,"Failed":0,"Unknown":0,"Error":0}}`,
		v1alpha1.AnnotationResultsSummary:  "Succeeded=1 Failed=0 Unknown=0 Error=0",
		v1alpha1.AnnotationUnprobed:        "1",
		v1alpha1.AnnotationUnprobedReasons: "NodeNotServed=1",
	}}, Spec: v1alpha1.PodProbeMarkerSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Probes:   []v1alpha1.PodContainerProbe{{Name: "tcp", ContainerName: "app", Probe: tcp}}}}
	if err := c.Create(ctx, ppm); err != nil {
		t.Fatal(err)
	}
	ppm.Status = v1alpha1.PodProbeMarkerStatus{ObservedGeneration: ppm.Generation, MatchedPods: 3, Conditions: []metav1.Condition{{
		Type: v1alpha1.PodProbeMarkerNodeBudget, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNodeBudgetExceeded,
		Message: "probes left out on 1 node(s) (st-silent)", LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(ctx, ppm); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := kubectl(t, "", "status", "-n", ns)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	contains(t, out,
		"Nodes: 1 of 3 served (label node-restriction.kubernetes.io/probeshim-served=true)",
		"NODE       SERVED   NODE SERVICE                     LEASE AGE  HOLDER     VERSION  PODS  PROBES",
		"st-served  yes      Live since 2026-12-03T10:00:00Z  5s         st-served  unknown  2     3",
		"st-silent  no       -                                10m        st-silent  unknown  0     0",
		"st-gone    no Node  -                                60m        st-gone    unknown  0     0",
		"st-served: probes start late: 3 probes start 2s late",
		"OpenKruise: installed (ConfigMap probeshim-system/probeshim-kruise-status)",
		"probes: probeshim acts (handed over from OpenKruise)",
		"crr:    held off, OpenKruise acts: webhook mcontainerrecreaterequest.kb.io is live",
		"Liveness decider: ConfigMap probeshim-system/probeshim-liveness-decider",
		"enabled: true, dry run: true",
		"rate limit: 1/s (burst 5), per namespace 0.25/s (burst 2); default max unavailable 25%",
		"circuit breaker: a workload's over 50% of its pods and at least 2 failing; a node's over 50% and at least 3",
		"blacklist: namespaces kube-system\n",
		"breakers open: 1 pod(s) whose liveness fails are held by one:",
		ns+"/held on st-served: CircuitBreakerOpen since",
		"Markers: 1",
		"status-shop  web   dry-run  1       3             1            1/0/0/0          1         False",
		"status-shop/web: probes left out on 1 node(s) (st-silent)",
		"status-shop/web: 1 matched pod(s) not probed: NodeNotServed=1",
		"(dry-run: probes run and are counted, nothing is written on pods",
	)
	if strings.Contains(out, ns+"/healed") {
		t.Errorf("a pod whose failure healed is shown as held by a breaker:\n%s", out)
	}

	out, errOut, err = kubectl(t, "", "status", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var st plugin.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if st.Kind != "Status" || st.APIVersion != plugin.OutputAPIVersion || len(st.Nodes) != 3 || st.Nodes[1].Name != "st-served" ||
		!st.Nodes[1].Served || st.Nodes[1].Lease == nil || st.Nodes[1].Lease.Holder != "st-served" || st.Nodes[1].Probes != 3 ||
		st.Nodes[1].Pods != 2 || st.Nodes[1].Version != "unknown" || !st.Nodes[0].NoNodeObject {
		t.Errorf("nodes: %+v", st.Nodes)
	}
	if len(st.Kruise.Work) != 2 || st.Kruise.Work[0].Actor != "probeshim" || !st.Kruise.Work[0].HandedOver || st.Kruise.Work[1].Actor != "kruise" {
		t.Errorf("kruise: %+v", st.Kruise)
	}
	if st.Decider.Config != "ok" || st.Decider.Settings == nil || !st.Decider.Settings.DryRun || len(st.Decider.Breakers) != 1 ||
		st.Decider.Breakers[0].Reason != string(decider.ReasonCircuitBreakerOpen) {
		t.Errorf("decider: %+v", st.Decider)
	}
	if len(st.Markers) != 1 || st.Markers[0].MatchedPods != 3 || st.Markers[0].PlacedPods != 1 || !st.Markers[0].Current || st.Markers[0].NodeBudget != "False" ||
		!st.Markers[0].DryRun || st.Markers[0].Results["tcp"].Succeeded != 1 || st.Markers[0].Unprobed == nil || *st.Markers[0].Unprobed != 1 ||
		st.Markers[0].UnprobedReasons[v1alpha1.UnprobedNodeNotServed] != 1 {
		t.Errorf("markers: %+v", st.Markers)
	}

	out, _, err = kubectl(t, "", "status", "-o", "yaml")
	var fromYAML plugin.Status
	if err != nil || yaml.Unmarshal([]byte(out), &fromYAML) != nil || len(fromYAML.Nodes) != 3 {
		t.Errorf("-o yaml: %v\n%s", err, out)
	}

	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: sys, Name: decider.ConfigMapName}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[decider.ConfigKey] = "enabeld: false\n"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	out, _, _ = kubectl(t, "", "status")
	contains(t, out, "ConfigMap probeshim-system/probeshim-liveness-decider is INVALID, every restart is held", `unknown field "enabeld"`)

	if _, _, err := kubectl(t, "", "status", "-o", "wide"); err == nil || !strings.Contains(err.Error(), `--output "wide"`) {
		t.Errorf("-o wide: %v", err)
	}
}
