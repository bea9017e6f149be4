// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// fakeReviewer answers SubjectAccessReviews from a fixed decision and records them.
type fakeReviewer struct {
	allowed bool
	// allow, when set, decides per review instead of allowed.
	allow func(*authorizationv1.ResourceAttributes) bool
	err   error
	got   []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviewer) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	sar := obj.(*authorizationv1.SubjectAccessReview)
	f.got = append(f.got, sar.Spec)
	if f.err != nil {
		return f.err
	}
	sar.Status.Allowed = f.allowed
	if f.allow != nil {
		sar.Status.Allowed = f.allow(sar.Spec.ResourceAttributes)
	}
	return nil
}

func marker(probes ...v1alpha1.PodContainerProbe) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Name: "idle", Namespace: "games"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gs"}},
			Probes:   probes,
		},
	}
}

func execProbe(name string, cmd ...string) v1alpha1.PodContainerProbe {
	return v1alpha1.PodContainerProbe{
		Name: name, ContainerName: "main", PodConditionType: "example.com/" + name,
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}}},
	}
}

func tcpProbe(name string, port int) v1alpha1.PodContainerProbe {
	return v1alpha1.PodContainerProbe{
		Name: name, ContainerName: "main", PodConditionType: "example.com/" + name,
		Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}}},
	}
}

// reviewMarker admits a marker with a reviewer that answers may, checks the answer and whether an
// access review was made, and returns both.
func reviewMarker(t *testing.T, op admissionv1.Operation, obj, old *v1alpha1.PodProbeMarker, may, wantAllow, wantReview bool) (admission.Response, *fakeReviewer) {
	t.Helper()
	r := &fakeReviewer{allowed: may}
	v := &PodProbeMarkerValidator{Reviewer: r}
	resp := v.Handle(context.Background(), markerRequest(t, op, obj, old))
	if resp.Allowed != wantAllow {
		t.Fatalf("allowed=%v, want %v: %+v", resp.Allowed, wantAllow, resp.Result)
	}
	if (len(r.got) > 0) != wantReview {
		t.Fatalf("%d access reviews, want review=%v", len(r.got), wantReview)
	}
	return resp, r
}

func markerRequest(t *testing.T, op admissionv1.Operation, obj, old *v1alpha1.PodProbeMarker) admission.Request {
	t.Helper()
	raw := func(o *v1alpha1.PodProbeMarker) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Namespace: "games", Name: obj.Name,
		UserInfo: authenticationv1.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"devs", "system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a", "b"}}},
		Object: raw(obj), OldObject: raw(old),
	}}
}

func TestPodProbeMarkerExecCheck(t *testing.T) {
	cases := []struct {
		name       string
		op         admissionv1.Operation
		obj, old   *v1alpha1.PodProbeMarker
		mayExec    bool
		wantReview bool
		wantAllow  bool
	}{
		{"create without exec", admissionv1.Create, marker(tcpProbe("up", 80)), nil, false, false, true},
		{"create with exec, allowed", admissionv1.Create, marker(execProbe("idle", "cat", "/idle")), nil, true, true, true},
		{"create with exec, denied", admissionv1.Create, marker(tcpProbe("up", 80), execProbe("idle", "cat", "/idle")), nil, false, true, false},
		{"update leaves exec alone", admissionv1.Update,
			marker(execProbe("idle", "cat", "/idle"), tcpProbe("up", 81)), marker(execProbe("idle", "cat", "/idle"), tcpProbe("up", 80)), false, false, true},
		{"update removes exec", admissionv1.Update,
			marker(tcpProbe("up", 80)), marker(execProbe("idle", "cat", "/idle"), tcpProbe("up", 80)), false, false, true},
		{"update changes the command", admissionv1.Update,
			marker(execProbe("idle", "cat", "/busy")), marker(execProbe("idle", "cat", "/idle")), false, true, false},
		{"update adds an exec probe", admissionv1.Update,
			marker(execProbe("idle", "cat", "/idle"), execProbe("other", "true")), marker(execProbe("idle", "cat", "/idle")), true, true, true},
		{"update turns a tcp probe into exec under the same name", admissionv1.Update,
			marker(execProbe("up", "true")), marker(tcpProbe("up", 80)), false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, r := reviewMarker(t, tc.op, tc.obj, tc.old, tc.mayExec, tc.wantAllow, tc.wantReview)
			if tc.wantReview {
				// First the dedicated verb; when the fake denies it, pods/exec.
				want := authorizationv1.SubjectAccessReviewSpec{
					User: "alice", UID: "u-1", Groups: []string{"devs", "system:authenticated"},
					Extra: map[string]authorizationv1.ExtraValue{"scopes": {"a", "b"}},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Namespace: "games", Verb: "exec", Group: "apps.kruise.io", Resource: "podprobemarkers"},
				}
				if !reflect.DeepEqual(r.got[0], want) {
					t.Errorf("review %+v\nwant %+v", r.got[0], want)
				}
				if !tc.mayExec {
					want.ResourceAttributes = &authorizationv1.ResourceAttributes{
						Namespace: "games", Verb: "create", Resource: "pods", Subresource: "exec"}
					if len(r.got) != 2 || !reflect.DeepEqual(r.got[1], want) {
						t.Errorf("reviews %+v\nwant the second %+v", r.got, want)
					}
				}
			}
			if !tc.wantAllow {
				msg := resp.Result.Message
				if resp.Result.Code != 403 || !strings.Contains(msg, "user alice may not create pods/exec in namespace games; exec probes run commands inside containers") ||
					!strings.Contains(msg, "the verb exec on podprobemarkers.apps.kruise.io") ||
					!strings.Contains(msg, "spec.probes[") {
					t.Errorf("rejection %d %q", resp.Result.Code, msg)
				}
			}
		})
	}
}

// kruise-game's controller has no pods/exec: the verb exec on podprobemarkers alone admits its exec
// markers, and pods/exec alone still does too.
func TestPodProbeMarkerExecVerb(t *testing.T) {
	markerVerb := func(a *authorizationv1.ResourceAttributes) bool {
		return a.Verb == VerbExecMarkers && a.Group == "apps.kruise.io" && a.Resource == "podprobemarkers" && a.Subresource == ""
	}
	podsExec := func(a *authorizationv1.ResourceAttributes) bool {
		return a.Verb == "create" && a.Resource == "pods" && a.Subresource == "exec"
	}
	for _, tc := range []struct {
		name  string
		allow func(*authorizationv1.ResourceAttributes) bool
		want  bool
	}{
		{"exec on podprobemarkers only", markerVerb, true},
		{"pods/exec only", podsExec, true},
		{"neither", func(*authorizationv1.ResourceAttributes) bool { return false }, false},
		{"other verbs on podprobemarkers do not count", func(a *authorizationv1.ResourceAttributes) bool {
			return a.Resource == "podprobemarkers" && a.Verb != VerbExecMarkers
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &PodProbeMarkerValidator{Reviewer: &fakeReviewer{allow: tc.allow}}
			resp := v.Handle(context.Background(), markerRequest(t, admissionv1.Create, marker(execProbe("idle", "cat", "/idle")), nil))
			if resp.Allowed != tc.want {
				t.Fatalf("allowed=%v, want %v: %+v", resp.Allowed, tc.want, resp.Result)
			}
		})
	}
}

// A marker that records its result nowhere on the pod is admitted with a warning, as OpenKruise
// admits it (its tcpSocket example has neither podConditionType nor markerPolicy).
func TestPodProbeMarkerWarning(t *testing.T) {
	p := tcpProbe("Idle", 8080)
	p.PodConditionType = ""
	resp, _ := reviewMarker(t, admissionv1.Create, marker(p), nil, false, true, false)
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], `spec.probes[0] ("Idle") sets neither podConditionType nor markerPolicy`) {
		t.Errorf("warnings %q", resp.Warnings)
	}
	resp, _ = reviewMarker(t, admissionv1.Create, marker(tcpProbe("up", 80)), nil, false, true, false)
	if len(resp.Warnings) != 0 {
		t.Errorf("warnings for a marker with a condition: %q", resp.Warnings)
	}
}

func TestPodProbeMarkerReviewError(t *testing.T) {
	v := &PodProbeMarkerValidator{Reviewer: &fakeReviewer{err: errors.New("connection refused")}}
	resp := v.Handle(context.Background(), markerRequest(t, admissionv1.Create, marker(execProbe("idle", "true")), nil))
	if resp.Allowed || resp.Result.Code != 500 || !strings.Contains(resp.Result.Message, "connection refused") {
		t.Errorf("a failed review must fail closed: %+v", resp.Result)
	}
}

func TestPodProbeMarkerUpdateRules(t *testing.T) {
	old := marker(tcpProbe("up", 80))
	moved := marker(tcpProbe("up", 80))
	moved.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	v := &PodProbeMarkerValidator{Reviewer: &fakeReviewer{}}
	resp := v.Handle(context.Background(), markerRequest(t, admissionv1.Update, moved, old))
	if resp.Allowed || resp.Result.Code != 422 || !strings.Contains(resp.Result.Message, "spec.selector") ||
		!strings.Contains(resp.Result.Message, "field is immutable") {
		t.Errorf("selector change: %+v", resp.Result)
	}
	if c := resp.Result.Details.Causes; len(c) != 1 || c[0].Field != "spec.selector" {
		t.Errorf("causes %+v", c)
	}

	bad := marker(tcpProbe("up", 0))
	resp = v.Handle(context.Background(), markerRequest(t, admissionv1.Update, bad, old))
	if resp.Allowed || !strings.Contains(resp.Result.Message, "spec.probes[0].probe.tcpSocket.port") {
		t.Errorf("invalid update: %+v", resp.Result)
	}
}

func loopbackProbe(name, host string) v1alpha1.PodContainerProbe {
	p := tcpProbe(name, 8080)
	p.Probe.TCPSocket.Host = host
	return p
}

// A probe naming the pod's loopback needs pods/portforward; one without a host goes to the pod
// IP and needs nothing.
func TestPodProbeMarkerPortForwardCheck(t *testing.T) {
	httpLoopback := tcpProbe("admin", 8080)
	httpLoopback.Probe.ProbeHandler = corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "localhost", Port: intstr.FromInt32(9000)}}
	cases := []struct {
		name       string
		op         admissionv1.Operation
		obj, old   *v1alpha1.PodProbeMarker
		may        bool
		wantReview bool
		wantAllow  bool
		wantField  string
	}{
		{"no host: the pod IP", admissionv1.Create, marker(tcpProbe("up", 80)), nil, false, false, true, ""},
		{"tcpSocket 127.0.0.1, denied", admissionv1.Create, marker(tcpProbe("up", 80), loopbackProbe("admin", "127.0.0.1")), nil, false, true, false,
			"spec.probes[1].probe.tcpSocket.host"},
		{"httpGet localhost, denied", admissionv1.Create, marker(httpLoopback), nil, false, true, false, "spec.probes[0].probe.httpGet.host"},
		{"tcpSocket ::1, allowed", admissionv1.Create, marker(loopbackProbe("admin", "::1")), nil, true, true, true, ""},
		{"update leaves the loopback probe alone", admissionv1.Update,
			marker(loopbackProbe("admin", "127.0.0.1"), tcpProbe("up", 81)), marker(loopbackProbe("admin", "127.0.0.1"), tcpProbe("up", 80)), false, false, true, ""},
		{"update points a probe at loopback", admissionv1.Update,
			marker(loopbackProbe("up", "127.0.0.1")), marker(tcpProbe("up", 8080)), false, true, false, "spec.probes[0].probe.tcpSocket.host"},
		{"update changes the loopback port", admissionv1.Update,
			marker(loopbackProbe("admin", "127.0.0.1")), marker(func() v1alpha1.PodContainerProbe {
				p := loopbackProbe("admin", "127.0.0.1")
				p.Probe.TCPSocket.Port = intstr.FromInt32(9)
				return p
			}()), false, true, false, "spec.probes[0].probe.tcpSocket.host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, r := reviewMarker(t, tc.op, tc.obj, tc.old, tc.may, tc.wantAllow, tc.wantReview)
			if tc.wantReview {
				if ra := r.got[0].ResourceAttributes; ra == nil || ra.Subresource != "portforward" || ra.Verb != "create" || ra.Resource != "pods" || ra.Namespace != "games" {
					t.Errorf("review %+v, want create pods/portforward in games", ra)
				}
			}
			if !tc.wantAllow {
				msg := resp.Result.Message
				if resp.Result.Code != 403 || !strings.Contains(msg, "user alice may not create pods/portforward in namespace games; probes naming 127.0.0.1 or localhost reach the pod's own loopback") ||
					!strings.Contains(msg, tc.wantField) {
					t.Errorf("rejection %d %q", resp.Result.Code, msg)
				}
			}
		})
	}
}

// A probe timeout above the cluster's ceiling is refused on its field when new or changed; one
// that was there before a lower ceiling does not block the marker's other edits.
func TestPodProbeMarkerTimeoutCeiling(t *testing.T) {
	v := &PodProbeMarkerValidator{Reviewer: &fakeReviewer{allowed: true}, MaxTimeoutSeconds: 30}
	withTimeout := func(p v1alpha1.PodContainerProbe, s int32) v1alpha1.PodContainerProbe {
		p.Probe.TimeoutSeconds = s
		return p
	}
	slow := marker(tcpProbe("up", 80), withTimeout(tcpProbe("slow", 81), 55))
	resp := v.Handle(context.Background(), markerRequest(t, admissionv1.Create, slow, nil))
	if resp.Allowed || resp.Result.Code != 422 {
		t.Fatalf("a 55 s timeout admitted under a 30 s ceiling: %+v", resp.Result)
	}
	if c := resp.Result.Details.Causes; len(c) != 1 || c[0].Field != "spec.probes[1].probe.timeoutSeconds" ||
		!strings.Contains(c[0].Message, "must be at most 30") || !strings.Contains(c[0].Message, "--max-probe-timeout-seconds") {
		t.Errorf("causes %+v, want one on spec.probes[1].probe.timeoutSeconds naming the ceiling and its flag", c)
	}
	if resp := v.Handle(context.Background(), markerRequest(t, admissionv1.Create, marker(withTimeout(tcpProbe("up", 80), 30)), nil)); !resp.Allowed {
		t.Errorf("a timeout at the ceiling refused: %+v", resp.Result)
	}

	// Admitted before the ceiling was lowered: other edits pass, raising it further does not.
	relabelled := slow.DeepCopy()
	relabelled.Spec.Probes[0].PodConditionType = "example.com/other"
	if resp := v.Handle(context.Background(), markerRequest(t, admissionv1.Update, relabelled, slow)); !resp.Allowed {
		t.Errorf("an edit that keeps the old 55 s timeout refused: %+v", resp.Result)
	}
	raised := slow.DeepCopy()
	raised.Spec.Probes[1].Probe.TimeoutSeconds = 56
	if resp := v.Handle(context.Background(), markerRequest(t, admissionv1.Update, raised, slow)); resp.Allowed {
		t.Error("a changed timeout above the ceiling admitted")
	}
	if resp := (&PodProbeMarkerValidator{Reviewer: &fakeReviewer{}}).Handle(context.Background(), markerRequest(t, admissionv1.Create, slow, nil)); !resp.Allowed {
		t.Errorf("refused without a ceiling: %+v", resp.Result)
	}
}
