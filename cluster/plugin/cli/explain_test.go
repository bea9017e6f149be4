// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/cluster/controller/liveness"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/cluster/plugin"
)

// explain tells which markers select a pod and why (and why not), each probe's last result with
// its reason and age, one that is not placed and why, whether its enhanced liveness is on and
// served, the decider's last decision and its decision events, newest first; -o json carries the
// same; pod/NAME and NAME both name the pod.
func TestExplain(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	c := testEnv.c
	ns := namespace(t, "explain-shop")
	now := testEnv.now

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ex-node", Labels: map[string]string{v1alpha1.LabelNodeServed: "true"}}}
	create(t, node)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", Labels: map[string]string{"app": "web", "tier": "front"},
		Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", v1alpha1.AnnotationServedNodeAffinity: "require",
			v1alpha1.AnnotationContainerProbeContext: `[{"name":"app","livenessProbe":{"tcpSocket":{"port":80}}}]`,
			decider.AnnotationRestarts:               `{"containers":{"app":{"failure":"2026-12-03T10:00:00Z","restarts":2,"lastRestart":"2026-12-03T10:00:05.000000Z"}}}`}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
		{Type: liveness.ConditionLivenessProtected, Status: corev1.ConditionTrue, Reason: liveness.ReasonNodeServiceLive,
			Message: "the node service on node ex-node runs the liveness probes", LastTransitionTime: metav1.Now()},
		{Type: decider.ConditionLivenessRestart, Status: corev1.ConditionFalse, Reason: string(decider.ReasonMaxUnavailable),
			Message: "held of app: PodDisruptionBudget explain-shop/web allows no more disruptions", LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	tcp := v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}}
	for _, m := range []*v1alpha1.PodProbeMarker{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "tcp", ContainerName: "app", Probe: tcp},
				{Name: "side", ContainerName: "sidecar", Probe: tcp}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db", "tier": "front"}},
			Probes:   []v1alpha1.PodContainerProbe{{Name: "tcp", ContainerName: "app", Probe: tcp}}}},
	} {
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	npp := &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Annotations: map[string]string{
		v1alpha1.AnnotationNodeService: v1alpha1.NodeServiceLive}},
		Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{{Name: pod.Name, Namespace: ns, UID: string(pod.UID), IP: "10.0.0.9",
			Probes: []v1alpha1.ContainerProbe{{Name: "web#tcp", ContainerName: "app", Probe: tcp}, {Name: "app-livenessProbe", ContainerName: "app", Probe: tcp}}}}}}
	create(t, npp)
	probed := metav1.NewTime(now.Add(-4 * time.Second))
	npp.Status.PodProbeStatuses = []v1alpha1.PodProbeStatus{{Name: pod.Name, Namespace: ns, UID: string(pod.UID), ProbeStates: []v1alpha1.ContainerProbeState{
		{Name: "web#tcp", State: v1alpha1.ProbeFailed, LastProbeTime: probed, LastTransitionTime: probed, Message: "dial tcp 10.0.0.9:80: connection refused"},
		{Name: "app-livenessProbe", State: v1alpha1.ProbeUnknown, LastProbeTime: probed, LastTransitionTime: probed,
			Message: v1alpha1.ProbeErrorMessage("SandboxNotFound", "the pod's sandbox is gone")}}}}
	if err := c.Status().Update(ctx, npp); err != nil {
		t.Fatal(err)
	}

	other := pod.DeepCopy()
	other.UID = "an-older-pod"
	for i, e := range []struct {
		reason, note string
		about        *corev1.Pod
	}{
		{decider.EventReasonRestart, "liveness probe failed: app", pod},
		{decider.EventReasonHeld, "\x1b[31mheld\x1b[0m (MaxUnavailable)", pod},
		{decider.EventReasonHeld, "of an older pod of the same name", other},
	} {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "web-0-"},
			EventTime: metav1.NewMicroTime(now.Add(time.Duration(i-10) * time.Second)), ReportingController: "probeshim",
			ReportingInstance: "probeshim-1", Action: "Decide", Reason: e.reason, Note: e.note, Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: e.about.UID}}
		if err := c.Create(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, err := kubectl(t, "", "explain", "pod/web-0", "-n", ns)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	contains(t, out,
		"Pod:      explain-shop/web-0",
		"Node:     ex-node, served (node-restriction.kubernetes.io/probeshim-served=true); node service Live",
		"Markers:  2 in the namespace, 1 select the pod",
		"  db   no match: the pod's labels fail app=db (selector app=db,tier=front)",
		"  web  matches: selector app=web matches the pod's labels",
		"  NAME               CONTAINER  STATE    REASON           LAST PROBE  MESSAGE",
		"  web#tcp            app        Failed   -                4s ago      dial tcp 10.0.0.9:80: connection refused",
		`  web#side           sidecar    -        NotPlaced        -           the pod has no container "sidecar"`,
		"  app-livenessProbe  app        Unknown  SandboxNotFound  4s ago      probe error (SandboxNotFound): the pod's sandbox is gone",
		"Enhanced liveness:               opted in; probeshim runs the liveness probes of app",
		"Served now:                      yes: the node is served and the probes run there",
		"Served nodes:                    require (node label node-restriction.kubernetes.io/probeshim-served)",
		"probeshim.io/LivenessProtected:  True (NodeServiceLive)",
		"probeshim.io/LivenessRestart:    False (MaxUnavailable)", "PodDisruptionBudget explain-shop/web allows no more disruptions",
		"Restarts of app:", "2, the last at 2026-12-03T10:00:05Z for the failure since 2026-12-03T10:00:00Z",
		`LivenessRestartHeld  \x1b[31mheld\x1b[0m (MaxUnavailable)`,
	)
	if held, restart := strings.Index(out, "LivenessRestartHeld"), strings.Index(out, "LivenessRestart "); held < 0 || restart < held {
		t.Errorf("decisions not newest first:\n%s", out)
	}
	if strings.Contains(out, "older pod") {
		t.Errorf("another pod's event shown:\n%s", out)
	}

	out, errOut, err = kubectl(t, "", "explain", "web-0", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	var ex plugin.Explanation
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if ex.Kind != "Explanation" || ex.Pod != ns+"/web-0" || ex.NodeServed == nil || !*ex.NodeServed || ex.NodeService != "Live" ||
		len(ex.Markers) != 2 || ex.Markers[0].Matches || !ex.Markers[1].Matches {
		t.Errorf("explanation: %+v", ex)
	}
	if len(ex.Probes) != 3 || ex.Probes[0].Name != "web#tcp" || ex.Probes[0].State != "Failed" || !ex.Probes[0].Placed ||
		ex.Probes[0].AgeSeconds == nil || *ex.Probes[0].AgeSeconds != 4 || ex.Probes[1].Placed || ex.Probes[1].Reason != "NotPlaced" ||
		!ex.Probes[2].Liveness || ex.Probes[2].Reason != "SandboxNotFound" {
		t.Errorf("probes: %+v", ex.Probes)
	}
	l := ex.Liveness
	if !l.OptedIn || !l.Served || len(l.Conditions) != 2 || len(l.Restarts) != 1 || l.Restarts[0].Restarts != 2 ||
		len(l.Decisions) != 2 || l.Decisions[0].Reason != decider.EventReasonHeld {
		t.Errorf("liveness: %+v", l)
	}

	if _, _, err := kubectl(t, "", "explain", "pod/nope", "-n", ns); err == nil || !strings.Contains(err.Error(), `pods "nope" not found`) {
		t.Errorf("a missing pod: %v", err)
	}
	if _, _, err := kubectl(t, "", "explain", "deployment/web", "-n", ns); err == nil || !strings.Contains(err.Error(), "only pods") {
		t.Errorf("not a pod: %v", err)
	}
}

// A pod on a virtual node, selected by a marker in dry run: explain says no node service probes
// it and that the marker writes nothing on it.
func TestExplainUnprobedDryRun(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	c := testEnv.c
	ns := namespace(t, "explain-vk")
	create(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ex-virtual", Labels: map[string]string{"type": "virtual-kubelet"}}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job-0", Labels: map[string]string{"app": "job"}},
		Spec: corev1.PodSpec{NodeName: "ex-virtual", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.10", Conditions: []corev1.PodCondition{
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	tcp := v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}}
	create(t, &v1alpha1.PodProbeMarker{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job", Annotations: map[string]string{v1alpha1.AnnotationDryRun: "true"}},
		Spec: v1alpha1.PodProbeMarkerSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "job"}},
			Probes: []v1alpha1.PodContainerProbe{{Name: "tcp", ContainerName: "app", Probe: tcp}}}})

	out, errOut, err := kubectl(t, "", "explain", "pod/job-0", "-n", ns)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut)
	}
	contains(t, out, "Not probed:", "VirtualNode: no node service probes this pod, nothing is written on it",
		"job  matches: selector app=job matches the pod's labels; dry run: its results are counted, not written on the pod")

	out, _, err = kubectl(t, "", "explain", "pod/job-0", "-n", ns, "-o", "json")
	var ex plugin.Explanation
	if err != nil || json.Unmarshal([]byte(out), &ex) != nil || ex.NotProbed != v1alpha1.UnprobedVirtualNode ||
		len(ex.Markers) != 1 || !ex.Markers[0].DryRun {
		t.Errorf("-o json: %v %+v", err, ex)
	}
}
