// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func podRequest(t *testing.T, op admissionv1.Operation, pod string) admission.Request {
	t.Helper()
	if !json.Valid([]byte(pod)) {
		t.Fatalf("test pod is not JSON: %s", pod)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: op, Namespace: "games", Object: runtime.RawExtension{Raw: []byte(pod)},
	}}
}

// patchJSON is the patch exactly as the API server receives it.
func patchJSON(t *testing.T, resp admission.Response) string {
	t.Helper()
	if err := resp.Complete(admission.Request{}); err != nil {
		t.Fatal(err)
	}
	return string(resp.Patch)
}

func TestLivenessMutatorPatch(t *testing.T) {
	const opted = `"annotations":{"apps.kruise.io/using-enhanced-liveness":"true"}`
	cases := []struct {
		name, pod string
		patch     string // "" = admitted unchanged
	}{
		{
			name: "two of three containers have probes, spec order kept",
			pod: `{"metadata":{"name":"gs-0",` + opted + `},"spec":{"containers":[
				{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["cat","/tmp/ok"]},"periodSeconds":5,"failureThreshold":3}},
				{"name":"log","image":"busybox"},
				{"name":"side","image":"busybox","livenessProbe":{"tcpSocket":{"port":8080},"timeoutSeconds":2}}]}}`,
			patch: `[{"op":"add","path":"/metadata/annotations/apps.kruise.io~1container-probe-context",` +
				`"value":"[{\"name\":\"main\",\"livenessProbe\":{\"exec\":{\"command\":[\"cat\",\"/tmp/ok\"]},\"periodSeconds\":5,\"failureThreshold\":3}},` +
				`{\"name\":\"side\",\"livenessProbe\":{\"tcpSocket\":{\"port\":8080},\"timeoutSeconds\":2}}]"},` +
				`{"op":"remove","path":"/spec/containers/0/livenessProbe"},` +
				`{"op":"remove","path":"/spec/containers/2/livenessProbe"}]`,
		},
		{
			name: "named port and loopback Host header are kept as written",
			pod: `{"metadata":{"generateName":"web-",` + opted + `},"spec":{"containers":[
				{"name":"web","image":"nginx","livenessProbe":{"httpGet":{"path":"/healthz","port":"http","httpHeaders":[{"name":"Host","value":"localhost"}]}}}]}}`,
			patch: `[{"op":"add","path":"/metadata/annotations/apps.kruise.io~1container-probe-context",` +
				`"value":"[{\"name\":\"web\",\"livenessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":\"http\",\"httpHeaders\":[{\"name\":\"Host\",\"value\":\"localhost\"}]}}}]"},` +
				`{"op":"remove","path":"/spec/containers/0/livenessProbe"}]`,
		},
		{
			name: "h2c and gRPC over TLS are kept as written",
			pod: `{"metadata":{"name":"p",` + opted + `},"spec":{"containers":[
				{"name":"web","image":"nginx","livenessProbe":{"httpGet":{"port":80,"protocol":"HTTP2"}}},
				{"name":"rpc","image":"grpc","livenessProbe":{"grpc":{"port":9090,"mode":"TLS"}}}]}}`,
			patch: `[{"op":"add","path":"/metadata/annotations/apps.kruise.io~1container-probe-context",` +
				`"value":"[{\"name\":\"web\",\"livenessProbe\":{\"httpGet\":{\"port\":80,\"protocol\":\"HTTP2\"}}},` +
				`{\"name\":\"rpc\",\"livenessProbe\":{\"grpc\":{\"port\":9090,\"service\":null,\"mode\":\"TLS\"}}}]"},` +
				`{"op":"remove","path":"/spec/containers/0/livenessProbe"},` +
				`{"op":"remove","path":"/spec/containers/1/livenessProbe"}]`,
		},
		{
			name: "sidecars (restartable init containers) first, plain init containers untouched",
			pod: `{"metadata":{"name":"p",` + opted + `},"spec":{
				"initContainers":[{"name":"setup","image":"busybox"},
					{"name":"proxy","image":"envoy","restartPolicy":"Always","livenessProbe":{"grpc":{"port":15021}}}],
				"containers":[{"name":"main","image":"busybox","livenessProbe":{"tcpSocket":{"port":80}}}]}}`,
			patch: `[{"op":"add","path":"/metadata/annotations/apps.kruise.io~1container-probe-context",` +
				`"value":"[{\"name\":\"proxy\",\"livenessProbe\":{\"grpc\":{\"port\":15021,\"service\":null}}},` +
				`{\"name\":\"main\",\"livenessProbe\":{\"tcpSocket\":{\"port\":80}}}]"},` +
				`{"op":"remove","path":"/spec/containers/0/livenessProbe"},` +
				`{"op":"remove","path":"/spec/initContainers/1/livenessProbe"}]`,
		},
		{
			name: "not opted in",
			pod: `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"false"}},"spec":{"containers":[
				{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["true"]}}}]}}`,
		},
		{
			name: "no annotations at all",
			pod:  `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["true"]}}}]}}`,
		},
		{
			name: "opted in without liveness probes",
			pod:  `{"metadata":{"name":"p",` + opted + `},"spec":{"containers":[{"name":"main","image":"busybox"}]}}`,
		},
		{
			name: "already moved: idempotent",
			pod: `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true",
				"apps.kruise.io/container-probe-context":"[{\"name\":\"main\",\"livenessProbe\":{\"exec\":{\"command\":[\"true\"]}}}]"}},
				"spec":{"containers":[{"name":"main","image":"busybox"}]}}`,
		},
		{
			name: "reinvoked after another webhook added a probe: merged in spec order",
			pod: `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true",
				"apps.kruise.io/container-probe-context":"[{\"name\":\"main\",\"livenessProbe\":{\"exec\":{\"command\":[\"true\"]}}}]"}},
				"spec":{"containers":[{"name":"proxy","image":"envoy","livenessProbe":{"tcpSocket":{"port":15000}}},{"name":"main","image":"busybox"}]}}`,
			patch: `[{"op":"replace","path":"/metadata/annotations/apps.kruise.io~1container-probe-context",` +
				`"value":"[{\"name\":\"proxy\",\"livenessProbe\":{\"tcpSocket\":{\"port\":15000}}},{\"name\":\"main\",\"livenessProbe\":{\"exec\":{\"command\":[\"true\"]}}}]"},` +
				`{"op":"remove","path":"/spec/containers/0/livenessProbe"}]`,
		},
		{
			name: "mirror pod left alone",
			pod: `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true","kubernetes.io/config.mirror":"abc"}},
				"spec":{"containers":[{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["true"]}}}]}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Scheduling onto served nodes has its own test (TestLivenessMutatorServedNodes); here
			// only its record in the annotation shows.
			m := LivenessMutator{ServedNodes: v1alpha1.ServedNodeOff}
			resp := m.Handle(context.Background(), podRequest(t, admissionv1.Create, tc.pod))
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			got := patchJSON(t, resp)
			want := strings.Replace(tc.patch, `{"op":"remove"`,
				`{"op":"add","path":"/metadata/annotations/probeshim.io~1served-node-affinity","value":"off"},{"op":"remove"`, 1)
			if got != want {
				t.Errorf("patch\n got: %s\nwant: %s", got, want)
			}
			if tc.patch == "" {
				return
			}
			// Applying the patch twice must be a no-op the second time (idempotent).
			again := m.Handle(context.Background(), podRequest(t, admissionv1.Create, applyPatch(t, tc.pod, got)))
			if p := patchJSON(t, again); !again.Allowed || p != "" {
				t.Errorf("second pass: allowed=%v patch %s", again.Allowed, p)
			}
		})
	}
}

func TestLivenessMutatorRejects(t *testing.T) {
	const opted = `"annotations":{"apps.kruise.io/using-enhanced-liveness":"true"}`
	cases := []struct {
		name, pod string
		want      []string // substrings of the message, field paths first
	}{
		{
			name: "successThreshold above 1",
			pod: `{"metadata":{"name":"p",` + opted + `},"spec":{"containers":[{"name":"main","image":"busybox",
				"livenessProbe":{"exec":{"command":["true"]},"successThreshold":2}}]}}`,
			want: []string{"spec.containers[0].livenessProbe.successThreshold", "must be 1 for a liveness probe", "games/p", "using-enhanced-liveness"},
		},
		{
			name: "tcpSocket host",
			pod: `{"metadata":{"generateName":"web-",` + opted + `},"spec":{"containers":[{"name":"a","image":"x"},{"name":"main","image":"busybox",
				"livenessProbe":{"tcpSocket":{"host":"10.0.0.1","port":80}}}]}}`,
			want: []string{"spec.containers[1].livenessProbe.tcpSocket.host", "games/web-"},
		},
		{
			name: "HTTP/2 with HTTPS (h2c only, as the kubelet)",
			pod: `{"metadata":{"name":"p",` + opted + `},"spec":{"containers":[{"name":"main","image":"busybox",
				"livenessProbe":{"httpGet":{"port":80,"scheme":"HTTPS","protocol":"HTTP2"}}}]}}`,
			want: []string{"spec.containers[0].livenessProbe.httpGet.protocol", "needs scheme HTTP"},
		},
		{
			name: "gRPC mode unknown",
			pod: `{"metadata":{"name":"p",` + opted + `},"spec":{"containers":[{"name":"main","image":"busybox",
				"livenessProbe":{"grpc":{"port":9090,"mode":"mTLS"}}}]}}`,
			want: []string{"spec.containers[0].livenessProbe.grpc.mode", `supported values: "Plaintext", "TLS"`},
		},
		{
			name: "terminationGracePeriodSeconds 0 (the kubelet refuses it on liveness probes)",
			pod: `{"metadata":{"name":"p",` + opted + `},"spec":{"containers":[{"name":"main","image":"busybox",
				"livenessProbe":{"exec":{"command":["true"]},"terminationGracePeriodSeconds":0}}]}}`,
			want: []string{"spec.containers[0].livenessProbe.terminationGracePeriodSeconds", "must be greater than 0"},
		},
		{
			name: "no handler",
			pod: `{"metadata":{"name":"p",` + opted + `},"spec":{"containers":[{"name":"main","image":"busybox",
				"livenessProbe":{"periodSeconds":3}}]}}`,
			want: []string{"spec.containers[0].livenessProbe", "exactly one of exec, httpGet, tcpSocket or grpc"},
		},
		{
			name: "malformed annotation",
			pod: `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true","apps.kruise.io/container-probe-context":"{"}},
				"spec":{"containers":[{"name":"main","image":"busybox"}]}}`,
			want: []string{"metadata.annotations[apps.kruise.io/container-probe-context]", "JSON list"},
		},
		{
			name: "annotation names a container the pod does not have",
			pod: `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true",
				"apps.kruise.io/container-probe-context":"[{\"name\":\"gone\",\"livenessProbe\":{\"exec\":{\"command\":[\"true\"]}}}]"}},
				"spec":{"containers":[{"name":"main","image":"busybox"}]}}`,
			want: []string{"metadata.annotations[apps.kruise.io/container-probe-context][0].name", "Not found", "gone"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := LivenessMutator{}.Handle(context.Background(), podRequest(t, admissionv1.Create, tc.pod))
			if resp.Allowed {
				t.Fatalf("allowed with patch %s", patchJSON(t, resp))
			}
			if resp.Result.Code != 422 || resp.Result.Reason != "Invalid" {
				t.Errorf("code %d reason %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message %q lacks %q", resp.Result.Message, w)
				}
			}
			if len(resp.Result.Details.Causes) == 0 || resp.Result.Details.Causes[0].Field != tc.want[0] {
				t.Errorf("causes %+v, want the first on %s", resp.Result.Details.Causes, tc.want[0])
			}
		})
	}
}

func TestLivenessMutatorIgnoresUpdates(t *testing.T) {
	pod := `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true"}},
		"spec":{"containers":[{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["true"]}}}]}}`
	resp := LivenessMutator{}.Handle(context.Background(), podRequest(t, admissionv1.Update, pod))
	if !resp.Allowed || patchJSON(t, resp) != "" {
		t.Errorf("update: allowed=%v patch %s", resp.Allowed, patchJSON(t, resp))
	}
}

func applyPatch(t *testing.T, doc, patch string) string {
	t.Helper()
	p, err := jsonpatch.DecodePatch([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// An enhanced-liveness probe naming the pod's loopback needs the creator's pods/portforward.
func TestLivenessMutatorLoopbackNeedsPortForward(t *testing.T) {
	const pod = `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true"}},
		"spec":{"containers":[{"name":"main","image":"busybox","livenessProbe":{"httpGet":{"host":"127.0.0.1","port":9000}}}]}}`
	const podIP = `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true"}},
		"spec":{"containers":[{"name":"main","image":"busybox","livenessProbe":{"httpGet":{"port":9000}}}]}}`
	req := func(p string) admission.Request {
		r := podRequest(t, admissionv1.Create, p)
		r.UserInfo.Username = "alice"
		return r
	}

	r := &fakeReviewer{}
	resp := LivenessMutator{Reviewer: r}.Handle(context.Background(), req(pod))
	if resp.Allowed || resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, "user alice may not create pods/portforward in namespace games") ||
		!strings.Contains(resp.Result.Message, "spec.containers[0].livenessProbe.httpGet.host") {
		t.Errorf("without pods/portforward: %+v", resp.Result)
	}
	if len(r.got) != 1 || r.got[0].ResourceAttributes.Subresource != "portforward" {
		t.Errorf("reviews %+v", r.got)
	}

	if resp := (LivenessMutator{Reviewer: &fakeReviewer{allowed: true}}).Handle(context.Background(), req(pod)); !resp.Allowed {
		t.Errorf("with pods/portforward: %+v", resp.Result)
	}
	r = &fakeReviewer{}
	if resp := (LivenessMutator{Reviewer: r}).Handle(context.Background(), req(podIP)); !resp.Allowed || len(r.got) != 0 {
		t.Errorf("a probe of the pod IP needs no review: %+v, %d reviews", resp.Result, len(r.got))
	}

	// A hostNetwork pod's loopback is the node's, which the pod's processes reach already: the
	// same check, and admitted with it, as the kubelet runs such a probe.
	hostNet := strings.Replace(pod, `"spec":{`, `"spec":{"hostNetwork":true,`, 1)
	if resp := (LivenessMutator{Reviewer: &fakeReviewer{}}).Handle(context.Background(), req(hostNet)); resp.Allowed {
		t.Error("hostNetwork pod without pods/portforward: admitted")
	}
	if resp := (LivenessMutator{Reviewer: &fakeReviewer{allowed: true}}).Handle(context.Background(), req(hostNet)); !resp.Allowed {
		t.Errorf("hostNetwork pod with pods/portforward: %+v", resp.Result)
	}
}

// An enhanced liveness probe above the cluster's timeout ceiling is refused on its field, whether
// in the container's spec or already in the probe context annotation.
func TestLivenessMutatorTimeoutCeiling(t *testing.T) {
	const opted = `"apps.kruise.io/using-enhanced-liveness":"true"`
	m := LivenessMutator{MaxTimeoutSeconds: 30}
	for _, tc := range []struct{ pod, field string }{
		{`{"metadata":{"name":"p","annotations":{` + opted + `}},"spec":{"containers":[{"name":"main","image":"busybox",
			"livenessProbe":{"exec":{"command":["true"]},"timeoutSeconds":55}}]}}`, "spec.containers[0].livenessProbe.timeoutSeconds"},
		{`{"metadata":{"name":"p","annotations":{` + opted + `,
			"apps.kruise.io/container-probe-context":"[{\"name\":\"side\",\"livenessProbe\":{\"exec\":{\"command\":[\"true\"]},\"timeoutSeconds\":31}}]"}},
			"spec":{"containers":[{"name":"side","image":"busybox"},{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["true"]}}}]}}`,
			"metadata.annotations[apps.kruise.io/container-probe-context][0].livenessProbe.timeoutSeconds"},
	} {
		resp := m.Handle(context.Background(), podRequest(t, admissionv1.Create, tc.pod))
		if resp.Allowed {
			t.Fatalf("admitted above the ceiling: %s", tc.pod)
		}
		if c := resp.Result.Details.Causes; len(c) != 1 || c[0].Field != tc.field || !strings.Contains(c[0].Message, "must be at most 30") {
			t.Errorf("causes %+v, want one on %s", c, tc.field)
		}
	}
	ok := `{"metadata":{"name":"p","annotations":{` + opted + `}},"spec":{"containers":[{"name":"main","image":"busybox",
		"livenessProbe":{"exec":{"command":["true"]},"timeoutSeconds":30}}]}}`
	if resp := m.Handle(context.Background(), podRequest(t, admissionv1.Create, ok)); !resp.Allowed {
		t.Errorf("a timeout at the ceiling refused: %+v", resp.Result)
	}
}

// A pod whose liveness probes would take more than their bound in the node's shared NodePodProbe
// is refused, naming the annotation and the bound.
func TestLivenessMutatorBoundsAPod(t *testing.T) {
	var containers []string
	for i := range 6 {
		containers = append(containers, fmt.Sprintf(`{"name":"c%d","image":"busybox","livenessProbe":{"exec":{"command":["sh","-c",%q]}}}`,
			i, strings.Repeat("x", 1500)))
	}
	pod := `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true"}},"spec":{"containers":[` +
		strings.Join(containers, ",") + `]}}`
	resp := LivenessMutator{}.Handle(context.Background(), podRequest(t, admissionv1.Create, pod))
	if resp.Allowed {
		t.Fatal("a pod with 9 KiB of liveness probes admitted")
	}
	if c := resp.Result.Details.Causes; len(c) != 1 || c[0].Field != "metadata.annotations[apps.kruise.io/container-probe-context]" ||
		!strings.Contains(c[0].Message, "over the 8192") {
		t.Errorf("causes %+v", c)
	}
	small := strings.ReplaceAll(pod, strings.Repeat("x", 1500), "true")
	if resp := (LivenessMutator{}).Handle(context.Background(), podRequest(t, admissionv1.Create, small)); !resp.Allowed {
		t.Errorf("six small probes refused: %+v", resp.Result)
	}
}

// A pod whose liveness probes move is scheduled only onto nodes with a live node service, or
// prefers them, as the cluster's default or its own annotation says; the choice is recorded.
func TestLivenessMutatorServedNodes(t *testing.T) {
	const served = `{"key":"node-restriction.kubernetes.io/probeshim-served","operator":"In","values":["true"]}`
	pod := func(annotations, spec string) string {
		return `{"metadata":{"name":"p","annotations":{"apps.kruise.io/using-enhanced-liveness":"true"` + annotations + `}},` +
			`"spec":{` + spec + `"containers":[{"name":"main","image":"busybox","livenessProbe":{"exec":{"command":["true"]}}}]}}`
	}
	cases := []struct {
		name, def, pod string
		affinity       string // the pod's spec.affinity after the patch, JSON; "" none
		recorded       string
		denied         string
	}{
		{name: "required by default", pod: pod("", ""), recorded: "require",
			affinity: `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[` + served + `]}]}}}`},
		{name: "every required term requires it (a DaemonSet's pod)", def: "require", recorded: "require",
			pod: pod("", `"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[`+
				`{"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]},{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}},`),
			affinity: `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[` +
				`{"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}],"matchExpressions":[` + served + `]},` +
				`{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]},` + served + `]}]}}}`},
		{name: "preferred", def: "prefer", pod: pod("", ""), recorded: "prefer",
			affinity: `{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"preference":{"matchExpressions":[` + served + `]},"weight":100}]}}`},
		{name: "the pod turns it off", def: "require", pod: pod(`,"probeshim.io/served-node-affinity":"off"`, ""), recorded: "off"},
		{name: "the pod asks for it where the cluster does not", def: "off", pod: pod(`,"probeshim.io/served-node-affinity":"require"`, ""), recorded: "require",
			affinity: `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[` + served + `]}]}}}`},
		{name: "a pod bound to its node is placed where it says", pod: pod("", `"nodeName":"n1",`), recorded: "require"},
		{name: "already required: not twice", recorded: "require",
			pod:      pod("", `"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[`+served+`]}]}}},`),
			affinity: `{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[` + served + `]}]}}}`},
		{name: "an unknown value is refused", pod: pod(`,"probeshim.io/served-node-affinity":"maybe"`, ""),
			denied: `metadata.annotations[probeshim.io/served-node-affinity]: Unsupported value: "maybe"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := LivenessMutator{ServedNodes: tc.def}.Handle(context.Background(), podRequest(t, admissionv1.Create, tc.pod))
			if tc.denied != "" {
				if resp.Allowed || !strings.Contains(resp.Result.Message, tc.denied) {
					t.Fatalf("allowed %v: %+v; want denied: %s", resp.Allowed, resp.Result, tc.denied)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			var got struct {
				Metadata struct{ Annotations map[string]string }
				Spec     struct{ Affinity json.RawMessage }
			}
			if err := json.Unmarshal([]byte(applyPatch(t, tc.pod, patchJSON(t, resp))), &got); err != nil {
				t.Fatal(err)
			}
			if a := string(got.Spec.Affinity); a != tc.affinity {
				t.Errorf("affinity\n got: %s\nwant: %s", a, tc.affinity)
			}
			if r := got.Metadata.Annotations[v1alpha1.AnnotationServedNodeAffinity]; r != tc.recorded {
				t.Errorf("recorded %q, want %q", r, tc.recorded)
			}
		})
	}
}
