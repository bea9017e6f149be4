// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// marker is a valid PodProbeMarker in the shape the OpenKruise documentation uses.
func marker() *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Name: "game-server-probe", Namespace: "games"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game-server"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name:             "Idle",
				ContainerName:    "game-server",
				Probe:            v1alpha1.ContainerProbeSpec{Probe: execProbe("bash", "/data/idle.sh")},
				PodConditionType: "game.kruise.io/idle",
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{
					State:       v1alpha1.ProbeSucceeded,
					Labels:      map[string]string{"gameserver-idle": "true"},
					Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "-10"},
				}, {
					State:       v1alpha1.ProbeFailed,
					Labels:      map[string]string{"gameserver-idle": "false"},
					Annotations: map[string]string{"controller.kubernetes.io/pod-deletion-cost": "10"},
				}},
			}},
		},
	}
}

func TestValidatePodProbeMarker(t *testing.T) {
	second := func(p v1alpha1.PodContainerProbe) func(*v1alpha1.PodProbeMarker) {
		return func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes = append(m.Spec.Probes, p) }
	}
	cases := []struct {
		name   string
		mutate func(*v1alpha1.PodProbeMarker)
		want   []wantErr
	}{
		// Accepted.
		{name: "documented example", mutate: func(*v1alpha1.PodProbeMarker) {}},
		{name: "condition only", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy = nil }},
		{name: "marker policy only", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].PodConditionType = "" }},
		{name: "selector by expression", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
		}},
		{name: "keeps marks when silent", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationOnNodeServiceSilent: v1alpha1.OnSilentKeepMarks}
		}},
		{name: "removes marks when silent", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationOnNodeServiceSilent: v1alpha1.OnSilentRemoveMarks}
		}},
		{name: "unknown choice when silent", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationOnNodeServiceSilent: "keep"}
		}, want: []wantErr{notSupported("metadata.annotations[probeshim.io/on-node-service-silent]",
			`"KeepMarks"`)}},
		{name: "dry run", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationDryRun: "true"}
		}},
		{name: "dry run off", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationDryRun: "false"}
		}},
		{name: "dry run yes", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationDryRun: "yes"}
		}, want: []wantErr{notSupported("metadata.annotations[probeshim.io/dry-run]", `"true", "false"`)}},
		{name: "dry run True", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationDryRun: "True"}
		}, want: []wantErr{notSupported("metadata.annotations[probeshim.io/dry-run]", `"true", "false"`)}},
		{name: "prefixed probe name", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "example.com/ready" }},
		{name: "second probe, grpc, other condition", mutate: second(v1alpha1.PodContainerProbe{
			Name: "healthy", ContainerName: "sidecar", PodConditionType: "example.com/healthy",
			Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}},
		})},
		{name: "Host header localhost", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.Probe = httpProbe("/", intstr.FromInt32(80), hostHeader("localhost"))
		}},

		// Selector.
		{name: "no selector", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector = nil }, want: []wantErr{
			required("spec.selector", "a label selector for the pods to probe")}},
		{name: "empty selector", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector = &metav1.LabelSelector{} }, want: []wantErr{
			invalid("spec.selector", "must not be empty: an empty selector matches every pod in the namespace")}},
		{name: "bad selector operator", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Is"}}}
		}, want: []wantErr{invalid("spec.selector.matchExpressions[0].operator", "not a valid selector operator")}},
		{name: "bad selector label", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "no spaces"}}
		}, want: []wantErr{invalid("spec.selector.matchLabels", "a valid label must be")}},

		// Probes.
		{name: "no probes", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes = nil }, want: []wantErr{
			required("spec.probes", "at least one probe is required")}},
		{name: "probe name empty", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "" }, want: []wantErr{
			required("spec.probes[0].name", "a probe name, unique within the PodProbeMarker")}},
		{name: "probe name with #", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "a#b" }, want: []wantErr{
			invalid("spec.probes[0].name", "must not contain '#', which joins the marker and probe names in NodePodProbe")}},
		// OpenKruise accepts any name: spaces, punctuation, more than 63 bytes.
		{name: "probe name with space", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "is idle (players: 0)" }},
		{name: "probe name over 63 bytes", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = strings.Repeat("a", 64) }},
		{name: "probe name in Chinese", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "空闲" }},
		{name: "probe name with a newline", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "idle\nforged log line" }, want: []wantErr{
			invalid("spec.probes[0].name", "must not contain control or other non-printable characters")}},
		{name: "probe name only spaces", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "  " }, want: []wantErr{
			invalid("spec.probes[0].name", "must not be only spaces")}},
		{name: "probe name not UTF-8", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "a\xffb" }, want: []wantErr{
			invalid("spec.probes[0].name", "must be valid UTF-8")}},
		{name: "probe-level terminationGracePeriodSeconds 0", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.TerminationGracePeriodSeconds = new(int64)
		}},
		{name: "duplicate probe name", mutate: second(v1alpha1.PodContainerProbe{
			Name: "Idle", ContainerName: "game-server", PodConditionType: "example.com/other",
			Probe: v1alpha1.ContainerProbeSpec{Probe: execProbe("true")},
		}), want: []wantErr{duplicate("spec.probes[1].name")}},
		{name: "container name empty", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].ContainerName = "" }, want: []wantErr{
			required("spec.probes[0].containerName", "the name of a container in the pod")}},
		{name: "container name upper case", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].ContainerName = "Main" }, want: []wantErr{
			invalid("spec.probes[0].containerName", "not a valid container name: a lowercase RFC 1123 label")}},
		{name: "probe errors carry the path", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.Probe = execProbe() }, want: []wantErr{
			required("spec.probes[0].probe.exec.command", "")}},
		{name: "no handler", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.Probe = corev1.Probe{} }, want: []wantErr{
			required("spec.probes[0].probe", "exactly one of exec, httpGet, tcpSocket or grpc")}},
		{name: "Host header naming a virtual host", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.Probe = httpProbe("/", intstr.FromInt32(80), hostHeader("game.example.com"))
		}},
		{name: "httpGet host", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.Probe = httpProbe("/", intstr.FromInt32(80))
			m.Spec.Probes[0].Probe.HTTPGet.Host = "10.0.0.1"
		}, want: []wantErr{forbidden("spec.probes[0].probe.httpGet.host", "the probe always targets the pod itself")}},

		// Where the result goes.
		// Accepted as OpenKruise does: the result is in NodePodProbe status only (a warning says so,
		// TestPodProbeMarkerWarnings).
		{name: "result recorded nowhere", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].PodConditionType, m.Spec.Probes[0].MarkerPolicy = "", nil
		}},
		{name: "condition not a qualified name", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].PodConditionType = "game idle" }, want: []wantErr{
			invalid("spec.probes[0].podConditionType", "name part must consist of alphanumeric characters")}},
		{name: "condition with bad prefix", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].PodConditionType = "Game_Kruise/idle" }, want: []wantErr{
			invalid("spec.probes[0].podConditionType", "prefix part a lowercase RFC 1123 subdomain")}},
		{name: "duplicate condition", mutate: second(v1alpha1.PodContainerProbe{
			Name: "other", ContainerName: "game-server", PodConditionType: "game.kruise.io/idle",
			Probe: v1alpha1.ContainerProbeSpec{Probe: execProbe("true")},
		}), want: []wantErr{duplicate("spec.probes[1].podConditionType")}},

		// Marker policy.
		{name: "policy state empty", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[0].State = "" }, want: []wantErr{
			required("spec.probes[0].markerPolicy[0].state", "Succeeded or Failed")}},
		{name: "policy state Unknown", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[0].State = v1alpha1.ProbeUnknown }, want: []wantErr{
			notSupported("spec.probes[0].markerPolicy[0].state", `supported values: "Succeeded", "Failed"`)}},
		{name: "policy state True (old OpenKruise wording)", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[0].State = "True" }, want: []wantErr{
			notSupported("spec.probes[0].markerPolicy[0].state", "")}},
		{name: "policy state repeated", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[1].State = v1alpha1.ProbeSucceeded }, want: []wantErr{
			duplicate("spec.probes[0].markerPolicy[1].state")}},
		{name: "policy without labels or annotations", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[1].Labels, m.Spec.Probes[0].MarkerPolicy[1].Annotations = nil, nil
		}, want: []wantErr{required("spec.probes[0].markerPolicy[1]", "set labels, annotations or both")}},
		{name: "bad label key", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[0].Labels["bad key"] = "x" }, want: []wantErr{
			invalid("spec.probes[0].markerPolicy[0].labels[bad key]", "name part must consist of alphanumeric characters")}},
		{name: "bad label value", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[0].Labels["ok"] = "not ok" }, want: []wantErr{
			invalid("spec.probes[0].markerPolicy[0].labels[ok]", "a valid label must be an empty string or consist of alphanumeric characters")}},
		{name: "bad annotation key", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[0].Annotations["a/b/c"] = "x" }, want: []wantErr{
			invalid("spec.probes[0].markerPolicy[0].annotations[a/b/c]", "a valid label key must consist of alphanumeric characters")}},
		{name: "annotation key case does not matter", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations["Example.COM/Cost"] = "x"
		}},
		{name: "annotations too large", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations["big"] = strings.Repeat("x", 256*1024)
		}, want: []wantErr{{"spec.probes[0].markerPolicy[0].annotations", "FieldValueTooLong", "may not be more than 262144 bytes"},
			{"spec.probes[0].markerPolicy[0].annotations[big]", "FieldValueTooLong", "may not be more than 4096 bytes"},
			{"spec.probes", "FieldValueTooLong", "may not be more than 65536 bytes"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := marker()
			tc.mutate(m)
			checkErrs(t, ValidatePodProbeMarker(m), tc.want...)
		})
	}
}

func TestValidatePodProbeMarkerUpdate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1alpha1.PodProbeMarker)
		want   []wantErr
	}{
		{name: "probes change", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.PeriodSeconds = 30 }},
		{name: "selector rewritten equal", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "game-server"}, MatchExpressions: []metav1.LabelSelectorRequirement{}}
		}},
		{name: "selector changed", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector.MatchLabels["app"] = "other" }, want: []wantErr{
			invalid("spec.selector", "field is immutable: delete the PodProbeMarker and create a new one to probe other pods")}},
		{name: "selector removed", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector = nil }, want: []wantErr{
			required("spec.selector", ""), invalid("spec.selector", "field is immutable")}},
		{name: "invalid new spec is still reported", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "a#b" }, want: []wantErr{
			invalid("spec.probes[0].name", "must not contain '#'")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			newObj := marker()
			tc.mutate(newObj)
			checkErrs(t, ValidatePodProbeMarkerUpdate(newObj, marker()), tc.want...)
		})
	}
}

func TestValidatePodProbeMarkerUpdateMessage(t *testing.T) {
	newObj := marker()
	newObj.Spec.Selector.MatchLabels["app"] = "other"
	errs := ValidatePodProbeMarkerUpdate(newObj, marker())
	const want = `spec.selector: Invalid value: "app=other": field is immutable: delete the PodProbeMarker and create a new one to probe other pods`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Fatalf("got %v\nwant %s", errs, want)
	}
}

func TestPodProbeMarkerWarnings(t *testing.T) {
	m := marker()
	if w := PodProbeMarkerWarnings(&m.Spec); len(w) != 0 {
		t.Errorf("warnings for the documented example: %q", w)
	}
	m.Spec.Probes[0].PodConditionType, m.Spec.Probes[0].MarkerPolicy = "", nil
	w := PodProbeMarkerWarnings(&m.Spec)
	const want = `spec.probes[0] ("Idle") sets neither podConditionType nor markerPolicy: its result is recorded only in the NodePodProbe status of the pod's node, nothing on the pod`
	if len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q\nwant %q", w, want)
	}
}
