// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package validation

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func tooLongErr(path, detail string) wantErr { return wantErr{path, field.ErrorTypeTooLong, detail} }
func tooManyErr(path, detail string) wantErr { return wantErr{path, field.ErrorTypeTooMany, detail} }

const mib = 1 << 20

func TestValidateProbeBounds(t *testing.T) {
	header := func(name, value string) corev1.HTTPHeader { return corev1.HTTPHeader{Name: name, Value: value} }
	headers := func(n, valueLen int) []corev1.HTTPHeader {
		var out []corev1.HTTPHeader
		for i := range n {
			out = append(out, header(fmt.Sprintf("X-H%d", i), strings.Repeat("v", valueLen)))
		}
		return out
	}
	grpc := func(service string) corev1.Probe {
		return corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Service: &service}}}
	}
	cases := []struct {
		name  string
		probe corev1.Probe
		want  []wantErr
	}{
		{name: "exec at the limits", probe: execProbe(append([]string{"sh", "-c", strings.Repeat("x", MaxExecCommandBytes-4-62)},
			strings.Split(strings.Repeat("a", 61), "")...)...)},
		{name: "1 MiB exec argument", probe: execProbe("sh", "-c", strings.Repeat("x", mib)),
			want: []wantErr{tooLongErr("probe.exec.command", "may not be more than 4096 bytes (have 1048580)")}},
		{name: "too many exec arguments", probe: execProbe(strings.Split(strings.Repeat("a", MaxExecArgs+1), "")...),
			want: []wantErr{tooManyErr("probe.exec.command", "must have at most 64 items")}},
		{name: "path at the limit", probe: httpProbe("/"+strings.Repeat("p", MaxHTTPPathLength-1), intstr.FromInt32(80))},
		{name: "long path", probe: httpProbe("/"+strings.Repeat("p", MaxHTTPPathLength), intstr.FromInt32(80)),
			want: []wantErr{tooLongErr("probe.httpGet.path", "may not be more than 2048 bytes")}},
		{name: "headers at the limits", probe: httpProbe("/", intstr.FromInt32(80), headers(MaxHTTPHeaders, MaxHTTPHeaderBytes/MaxHTTPHeaders-5)...)},
		{name: "1 MiB header value", probe: httpProbe("/", intstr.FromInt32(80), header("X-Big", strings.Repeat("v", mib))),
			want: []wantErr{
				tooLongErr("probe.httpGet.httpHeaders[0].value", "may not be more than 1024 bytes"),
				tooLongErr("probe.httpGet.httpHeaders", "may not be more than 4096 bytes (have 1048581)"),
			}},
		{name: "long header name", probe: httpProbe("/", intstr.FromInt32(80), header("X-"+strings.Repeat("n", MaxHTTPHeaderNameLength), "v")),
			want: []wantErr{tooLongErr("probe.httpGet.httpHeaders[0].name", "may not be more than 128 bytes")}},
		{name: "too many headers", probe: httpProbe("/", intstr.FromInt32(80), headers(MaxHTTPHeaders+1, 1)...),
			want: []wantErr{tooManyErr("probe.httpGet.httpHeaders", "must have at most 16 items")}},
		{name: "headers over the total", probe: httpProbe("/", intstr.FromInt32(80), headers(5, 1000)...),
			want: []wantErr{tooLongErr("probe.httpGet.httpHeaders", "may not be more than 4096 bytes (have 5020)")}},
		{name: "grpc service at the limit", probe: grpc(strings.Repeat("s", MaxGRPCServiceLength))},
		{name: "long grpc service", probe: grpc(strings.Repeat("s", MaxGRPCServiceLength+1)),
			want: []wantErr{tooLongErr("probe.grpc.service", "may not be more than 256 bytes")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, ValidateProbe(&tc.probe, ProbeOptions{}, field.NewPath("probe")), tc.want...)
		})
	}
}

// A bad value is never repeated whole: a 1 MiB header with a newline must not come back as a
// 1 MiB error message.
func TestValidateProbeErrorsDoNotRepeatHugeValues(t *testing.T) {
	p := httpProbe("/", intstr.FromInt32(80), corev1.HTTPHeader{Name: "X-Big", Value: "\n" + strings.Repeat("v", mib)})
	errs := ValidateProbe(&p, ProbeOptions{}, field.NewPath("probe"))
	if len(errs) == 0 {
		t.Fatal("accepted")
	}
	if msg := errs.ToAggregate().Error(); len(msg) > 2048 {
		t.Errorf("error message is %d bytes", len(msg))
	}
}

func TestValidatePodProbeMarkerBounds(t *testing.T) {
	withProbes := func(n int) func(*v1alpha1.PodProbeMarker) {
		return func(m *v1alpha1.PodProbeMarker) {
			p := m.Spec.Probes[0]
			m.Spec.Probes = nil
			for i := range n {
				q := *p.DeepCopy()
				q.Name = fmt.Sprintf("p%d", i)
				q.PodConditionType = fmt.Sprintf("example.com/p%d", i)
				m.Spec.Probes = append(m.Spec.Probes, q)
			}
		}
	}
	policy := func(labels, annotations int, valueLen int) func(*v1alpha1.PodProbeMarker) {
		return func(m *v1alpha1.PodProbeMarker) {
			pol := v1alpha1.ProbeMarkerPolicy{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{}, Annotations: map[string]string{}}
			for i := range labels {
				pol.Labels[fmt.Sprintf("l%d", i)] = "v"
			}
			for i := range annotations {
				pol.Annotations[fmt.Sprintf("a%d", i)] = strings.Repeat("v", valueLen)
			}
			m.Spec.Probes[0].MarkerPolicy = []v1alpha1.ProbeMarkerPolicy{pol}
		}
	}
	cases := []struct {
		name   string
		mutate func(*v1alpha1.PodProbeMarker)
		want   []wantErr
	}{
		{name: "probes at the limit", mutate: withProbes(MaxProbesPerMarker)},
		{name: "5,000 probes", mutate: withProbes(5000),
			want: []wantErr{tooManyErr("spec.probes", "must have at most 32 probes; split them over several PodProbeMarkers"),
				tooLongErr("spec.probes", "may not be more than 65536 bytes (have 640000)")}},
		{name: "probe name at the limit", mutate: func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = strings.Repeat("n", MaxProbeNameLength) }},
		{name: "long probe name", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Name = strings.Repeat("d ", 127)
		}, want: []wantErr{tooLongErr("spec.probes[0].name", "may not be more than 253 bytes")}},
		{name: "policy at the limits", mutate: policy(MaxPolicyLabels, MaxPolicyAnnotations, MaxPolicyAnnotationValueLength-100)},
		{name: "too many labels and annotations", mutate: policy(MaxPolicyLabels+1, MaxPolicyAnnotations+1, 1), want: []wantErr{
			tooManyErr("spec.probes[0].markerPolicy[0].labels", "must have at most 16 items"),
			tooManyErr("spec.probes[0].markerPolicy[0].annotations", "must have at most 16 items"),
		}},
		{name: "long annotation value", mutate: policy(0, 1, MaxPolicyAnnotationValueLength+1), want: []wantErr{
			tooLongErr("spec.probes[0].markerPolicy[0].annotations[a0]", "may not be more than 4096 bytes"),
		}},
		{name: "1 MiB header in a marker", mutate: func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.Probe = httpProbe("/", intstr.FromInt32(80), corev1.HTTPHeader{Name: "X-Big", Value: strings.Repeat("v", mib)})
		}, want: []wantErr{
			tooLongErr("spec.probes[0].probe.httpGet.httpHeaders[0].value", "may not be more than 1024 bytes"),
			tooLongErr("spec.probes[0].probe.httpGet.httpHeaders", "may not be more than 4096 bytes"),
		}},
		{name: "metadata of all probes over the total", mutate: func(m *v1alpha1.PodProbeMarker) {
			withProbes(MaxProbesPerMarker)(m)
			for i := range m.Spec.Probes {
				m.Spec.Probes[i].MarkerPolicy = []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeFailed,
					Annotations: map[string]string{"a": strings.Repeat("v", 3000)}}}
			}
		}, want: []wantErr{tooLongErr("spec.probes", "may not be more than 65536 bytes (have 96032)")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := marker()
			tc.mutate(m)
			checkErrs(t, ValidatePodProbeMarker(m), tc.want...)
		})
	}
}

// The liveness context and a CRR's preStop share the handler bounds.
func TestBoundsApplyToLivenessAndPreStop(t *testing.T) {
	big := strings.Repeat("x", mib)
	errs := ValidateContainerProbeContext([]v1alpha1.ContainerLivenessProbe{{Name: "app", LivenessProbe: execProbe("sh", "-c", big)}},
		field.NewPath("ctx"))
	checkErrs(t, errs, tooLongErr("ctx[0].livenessProbe.exec.command", "may not be more than 4096 bytes"))
	errs = ValidatePreStop(&v1alpha1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", big}}}, "", field.NewPath("preStop"))
	checkErrs(t, errs, tooLongErr("preStop.exec.command", "may not be more than 4096 bytes"))
}

func TestMessageCap(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 1024}, {1, 1024}, {192, 1024}, {193, 1018}, {1000, 196}, {5000, 39}, {100000, MinProbeMessageBytes},
	} {
		if got := MessageCap(tc.n); got != tc.want {
			t.Errorf("MessageCap(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestTruncateMessage(t *testing.T) {
	cases := []struct {
		name, in string
		limit    int
		want     string
	}{
		{"short", "connection refused", 64, "connection refused"},
		{"exact", "abcd", 4, "abcd"},
		{"cut", "abcdefgh", 7, "abcd…"},
		{"html escapes count 6", "<<<<", 12, "<…"},
		{"multibyte rune kept whole", "ééééé", 8, "éé…"},
		{"invalid utf-8 replaced", "a\xffb", 16, "a\uFFFDb"},
		{"zero", "abc", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := TruncateMessage(tc.in, tc.limit)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("invalid UTF-8 %q", got)
			}
			b, _ := json.Marshal(got)
			if len(b)-2 > tc.limit {
				t.Errorf("encoded %d bytes > %d", len(b)-2, tc.limit)
			}
		})
	}
}

// Whatever the input, the encoded result fits the limit.
func FuzzTruncateMessage(f *testing.F) {
	f.Add("hello <world> & \"you\"\n\x00\xff", 10)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = limit % 2048
		if limit < 0 {
			limit = -limit
		}
		got := TruncateMessage(s, limit)
		b, _ := json.Marshal(got)
		if len(b)-2 > limit || !utf8.ValidString(got) {
			t.Fatalf("TruncateMessage(%q, %d) = %q (%d encoded bytes)", s, limit, got, len(b)-2)
		}
	})
}
