// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podstatus

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Minute))
)

// idleProbe is the game-server example: Succeeded marks the pod idle and cheap to delete,
// Failed makes it expensive to delete.
func idleProbe() *v1alpha1.PodContainerProbe {
	return &v1alpha1.PodContainerProbe{Name: "idle", ContainerName: "main", PodConditionType: "game.io/idle",
		MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
			{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"gameserver-idle": "true"},
				Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-10"}},
			{State: v1alpha1.ProbeFailed, Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "10"}},
		}}
}

func res(name string, p *v1alpha1.PodContainerProbe, state v1alpha1.ProbeState, msg string, transition metav1.Time) result {
	return result{name: name, probe: p, state: v1alpha1.ContainerProbeState{Name: name, State: state, Message: msg,
		LastProbeTime: t1, LastTransitionTime: transition}, marks: state}
}

// silenced is res after the node service of node-a went silent at t1.
func silenced(r result, keepMarks bool) result {
	r.silence("node-a", t1.Time, keepMarks)
	return r
}

func recordOf(l, a, c []string) string {
	b, _ := json.Marshal(record{Labels: l, Annotations: a, Conditions: c})
	return string(b)
}

// podWith builds a pod with labels, annotations and conditions "type=status:message@time".
func podWith(lbls, ann map[string]string, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: lbls, Annotations: ann},
		Status: corev1.PodStatus{Conditions: append([]corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, conds...)}}
}

func cond(t string, s corev1.ConditionStatus, msg string, transition metav1.Time) corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodConditionType(t), Status: s, Message: msg, LastProbeTime: t0, LastTransitionTime: transition}
}

// describe renders a change compactly and deterministically.
func describe(c change) string {
	var parts []string
	kv := func(prefix string, m map[string]*string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if m[k] == nil {
				parts = append(parts, prefix+"-"+k)
			} else {
				parts = append(parts, prefix+"+"+k+"="+*m[k])
			}
		}
	}
	kv("L", c.labels)
	kv("A", c.annotations)
	for _, sc := range c.setConditions {
		parts = append(parts, fmt.Sprintf("C+%s=%s:%s", sc.Type, sc.Status, sc.Message))
	}
	for _, t := range c.removeConditions {
		parts = append(parts, "C-"+string(t))
	}
	return strings.Join(parts, " ")
}

func TestPlan(t *testing.T) {
	idle := idleProbe()
	const cost = "controller.kubernetes.io/pod-deletion-cost"
	fullRecord := recordOf([]string{"gameserver-idle"}, []string{cost}, []string{"game.io/idle"})
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		results []result
		want    string
	}{
		{name: "nothing to do", pod: podWith(nil, nil)},
		{name: "succeeded on a fresh pod",
			pod:     podWith(map[string]string{"app": "game"}, nil),
			results: []result{res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t0)},
			want: "L+gameserver-idle=true A+" + cost + "=-10 A+" + RecordAnnotation + "=" + fullRecord +
				" C+game.io/idle=True:"},
		{name: "already marked: no change",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			results: []result{res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t0)}},
		{name: "a lastProbeTime refresh alone is no change",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				corev1.PodCondition{Type: "game.io/idle", Status: corev1.ConditionTrue, LastTransitionTime: t0}),
			results: []result{res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t0)}},
		{name: "failed: other state's label removed, own annotation set, condition False",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			results: []result{res("m#idle", idle, v1alpha1.ProbeFailed, "exit 1", t1)},
			want: "L-gameserver-idle A+" + cost + "=10 A+" + RecordAnnotation + "=" + recordOf(nil, []string{cost}, []string{"game.io/idle"}) +
				" C+game.io/idle=False:exit 1"},
		{name: "unknown: both states removed, condition Unknown (never False)",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			results: []result{res("m#idle", idle, v1alpha1.ProbeUnknown, "container restarted", t1)},
			want: "L-gameserver-idle A-" + cost + " A+" + RecordAnnotation + "=" + recordOf(nil, nil, []string{"game.io/idle"}) +
				" C+game.io/idle=Unknown:container restarted"},
		{name: "node service silent: condition Unknown with why and since when, marks removed by default",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			results: []result{silenced(res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t0), false)},
			want: "L-gameserver-idle A-" + cost + " A+" + RecordAnnotation + "=" + recordOf(nil, nil, []string{"game.io/idle"}) +
				" C+game.io/idle=Unknown:the probeshim node service on node node-a is silent since 2026-11-29T10:01:00Z: its result is not current; last result Succeeded"},
		{name: "node service silent, marker keeps marks: only the condition goes Unknown",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			results: []result{silenced(res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t0), true)},
			want:    "C+game.io/idle=Unknown:the probeshim node service on node node-a is silent since 2026-11-29T10:01:00Z: its result is not current; last result Succeeded"},
		{name: "node service silent and already written: no change",
			pod: podWith(nil, map[string]string{RecordAnnotation: recordOf(nil, nil, []string{"game.io/idle"})},
				cond("game.io/idle", corev1.ConditionUnknown, "the probeshim node service on node node-a is silent since 2026-11-29T10:01:00Z: its result is not current; last result Succeeded", t1)),
			results: []result{silenced(res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t0), false)}},
		{name: "message-only change propagates",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				cond("game.io/idle", corev1.ConditionTrue, "players: 0", t0)),
			results: []result{res("m#idle", idle, v1alpha1.ProbeSucceeded, "players: 1", t0)},
			want:    "C+game.io/idle=True:players: 1"},
		{name: "probe gone: recorded marks removed, condition kept in the record until seen gone",
			pod: podWith(map[string]string{"gameserver-idle": "true", "app": "game"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord, "user": "x"},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			want: "L-gameserver-idle A-" + cost + " A+" + RecordAnnotation + "=" + recordOf(nil, nil, []string{"game.io/idle"}) +
				" C-game.io/idle"},
		{name: "probe gone, condition gone: record removed",
			pod:  podWith(nil, map[string]string{RecordAnnotation: recordOf(nil, nil, []string{"game.io/idle"})}),
			want: "A-" + RecordAnnotation},
		{name: "recorded key the user already removed: nothing to remove",
			pod:  podWith(nil, map[string]string{RecordAnnotation: recordOf([]string{"gone"}, nil, nil)}),
			want: "A-" + RecordAnnotation},
		{name: "labels the user set are never touched by cleanup",
			pod:  podWith(map[string]string{"gameserver-idle": "true"}, nil, cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			want: ""},
		{name: "unreadable record is rewritten",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: "{oops"},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			results: []result{res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t0)},
			want:    "A+" + RecordAnnotation + "=" + fullRecord},
		{name: "a forged record never removes Ready, another controller's gate or reserved keys",
			pod: podWith(map[string]string{"apps.kruise.io/gate": "held"},
				map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true", RecordAnnotation: recordOf(
					[]string{"apps.kruise.io/gate"}, []string{v1alpha1.AnnotationUsingEnhancedLiveness}, []string{"KruisePodReady", "Ready"})},
				cond("KruisePodReady", corev1.ConditionTrue, "", t0)),
			want: "A-" + RecordAnnotation},
		{name: "a result without a state does nothing",
			pod:     podWith(nil, nil),
			results: []result{res("m#idle", idle, "", "", t0)}},
		{name: "transition time change with the same status is written",
			pod: podWith(map[string]string{"gameserver-idle": "true"}, map[string]string{cost: "-10", RecordAnnotation: fullRecord},
				cond("game.io/idle", corev1.ConditionTrue, "", t0)),
			results: []result{res("m#idle", idle, v1alpha1.ProbeSucceeded, "", t1)},
			want:    "C+game.io/idle=True:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := plan(tc.pod, wanted(tc.results))
			if d := describe(got); d != tc.want {
				t.Errorf("plan =\n  %s\nwant\n  %s", d, tc.want)
			}
			if got.empty() != (tc.want == "") {
				t.Errorf("empty() = %v", got.empty())
			}
		})
	}
}

func TestWantedResolvesConflictsDeterministically(t *testing.T) {
	a := &v1alpha1.PodContainerProbe{Name: "a", PodConditionType: "shared", MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
		{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"k": "from-a"}},
		{State: v1alpha1.ProbeFailed, Labels: map[string]string{"gone": "x"}}}}
	b := &v1alpha1.PodContainerProbe{Name: "b", PodConditionType: "shared", MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
		{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"k": "from-b", "gone": "set-by-b"}}}}
	for _, order := range [][]result{
		{res("m1#a", a, v1alpha1.ProbeSucceeded, "a", t0), res("m2#b", b, v1alpha1.ProbeSucceeded, "b", t0)},
		{res("m2#b", b, v1alpha1.ProbeSucceeded, "b", t0), res("m1#a", a, v1alpha1.ProbeSucceeded, "a", t0)},
	} {
		m := wanted(order)
		if m.labels["k"] != "from-a" {
			t.Errorf("label k = %q, want the first result's (by name)", m.labels["k"])
		}
		if m.conditions["shared"].Message != "a" {
			t.Errorf("condition from %q, want the first result's", m.conditions["shared"].Message)
		}
		if m.labels["gone"] != "set-by-b" {
			t.Errorf("a value to set must beat a removal")
		}
	}
}

func TestWantedSkipsInvalidKeys(t *testing.T) {
	p := &v1alpha1.PodContainerProbe{Name: "p", MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded,
		Labels:      map[string]string{"ok": "v", "bad": "has space", RecordAnnotation: "x"},
		Annotations: map[string]string{"Example.com/Upper": "fine", RecordAnnotation: "x", "bad key!": "v"}}}}
	m := wanted([]result{res("m#p", p, v1alpha1.ProbeSucceeded, "", t0)})
	if got := slices.Sorted(maps.Keys(m.labels)); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("labels = %v", got)
	}
	if got := slices.Sorted(maps.Keys(m.annotations)); !slices.Equal(got, []string{"Example.com/Upper"}) {
		t.Errorf("annotations = %v", got)
	}
}

// A marker stored before the reserved-key rule, or written while the webhook was away, still
// cannot make the controller write (or remove) a reserved key or an owned condition.
func TestWantedSkipsReservedKeys(t *testing.T) {
	p := &v1alpha1.PodContainerProbe{Name: "p", PodConditionType: "Ready", MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{
		{State: v1alpha1.ProbeSucceeded,
			Labels: map[string]string{"ok": "v", "node-role.kubernetes.io/x": "y"},
			Annotations: map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true",
				v1alpha1.AnnotationContainerProbeContext:     `[{"name":"main","livenessProbe":{"exec":{"command":["id"]}}}]`,
				"controller.kubernetes.io/pod-deletion-cost": "-10"}},
		{State: v1alpha1.ProbeFailed, Labels: map[string]string{"x.k8s.io/gate": "v", "other": "v"}}}}
	m := wanted([]result{res("m#p", p, v1alpha1.ProbeSucceeded, "", t0)})
	if got := slices.Sorted(maps.Keys(m.labels)); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("labels = %v", got)
	}
	if got := slices.Sorted(maps.Keys(m.annotations)); !slices.Equal(got, []string{"controller.kubernetes.io/pod-deletion-cost"}) {
		t.Errorf("annotations = %v", got)
	}
	if got := slices.Sorted(maps.Keys(m.dropLabels)); !slices.Equal(got, []string{"other"}) {
		t.Errorf("labels to drop = %v", got)
	}
	if len(m.conditions) != 0 {
		t.Errorf("conditions = %v, want none (Ready is the kubelet's)", m.conditions)
	}
}

func TestPatches(t *testing.T) {
	v := "true"
	c := change{labels: map[string]*string{"a": &v, "b": nil}, annotations: map[string]*string{},
		setConditions: []corev1.PodCondition{{Type: "x", Status: corev1.ConditionTrue, LastTransitionTime: t0},
			{Type: "z", Status: corev1.ConditionUnknown, Reason: "CommandNotFound", Message: "probe error (CommandNotFound): x", LastTransitionTime: t0}},
		removeConditions: []corev1.PodConditionType{"y"}}
	if got, want := string(c.metadataPatch("u1")), `{"metadata":{"labels":{"a":"true","b":null},"uid":"u1"}}`; got != want {
		t.Errorf("metadata patch = %s, want %s", got, want)
	}
	want := `{"metadata":{"uid":"u1"},"status":{"conditions":[` +
		`{"lastProbeTime":null,"lastTransitionTime":"2026-11-29T10:00:00Z","message":null,"reason":null,"status":"True","type":"x"},` +
		`{"lastProbeTime":null,"lastTransitionTime":"2026-11-29T10:00:00Z","message":"probe error (CommandNotFound): x","reason":"CommandNotFound","status":"Unknown","type":"z"},` +
		`{"$patch":"delete","type":"y"}]}}`
	if got := string(c.statusPatch("u1")); got != want {
		t.Errorf("status patch = %s, want %s", got, want)
	}
	empty := change{}
	if empty.metadataPatch("u") != nil || empty.statusPatch("u") != nil {
		t.Error("empty change must give no patches")
	}
}

// A probe that could not run gives its condition (Unknown, as before) the reason its message
// begins with; no other state has one, whatever its message says, nor a silent node's Unknown.
// A reason that changes (or appears on a condition written before) is a change to write.
func TestConditionReasonOfProbeError(t *testing.T) {
	const errMsg = `probe error (CommandNotFound): exec: "nc": executable file not found in $PATH`
	p := idleProbe()
	for _, tc := range []struct {
		name   string
		r      result
		status corev1.ConditionStatus
		reason string
	}{
		{"Unknown: could not run", res("m#idle", p, v1alpha1.ProbeUnknown, errMsg, t0), corev1.ConditionUnknown, "CommandNotFound"},
		{"Unknown: not running", res("m#idle", p, v1alpha1.ProbeUnknown, "container is not running", t0), corev1.ConditionUnknown, ""},
		{"Failed: the probe printed it", res("m#idle", p, v1alpha1.ProbeFailed, errMsg, t0), corev1.ConditionFalse, ""},
		{"Succeeded", res("m#idle", p, v1alpha1.ProbeSucceeded, errMsg, t0), corev1.ConditionTrue, ""},
		{"silent node", silenced(res("m#idle", p, v1alpha1.ProbeUnknown, errMsg, t0), false), corev1.ConditionUnknown, ""},
	} {
		c := wanted([]result{tc.r}).conditions["game.io/idle"]
		if c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: condition %s reason %q, want %s reason %q", tc.name, c.Status, c.Reason, tc.status, tc.reason)
		}
	}

	m := wanted([]result{res("m#idle", p, v1alpha1.ProbeUnknown, errMsg, t0)})
	written := cond("game.io/idle", corev1.ConditionUnknown, errMsg, t0) // before reasons: none
	if got := describe(plan(podWith(nil, nil, written), m)); !strings.Contains(got, "C+game.io/idle=Unknown") {
		t.Errorf("a condition without its reason: plan %s, want it set", got)
	}
	written.Reason = "CommandNotFound"
	if c := plan(podWith(nil, nil, written), m); len(c.setConditions) != 0 {
		t.Errorf("a condition with its reason: plan %s, want no condition change", describe(c))
	}
}
