// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

const ppmWebhook = `admission webhook "podprobemarkers.probeshim.io" denied the request`

func validMarker(name string) *v1alpha1.PodProbeMarker {
	return &v1alpha1.PodProbeMarker{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "games"},
		Spec: v1alpha1.PodProbeMarkerSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gs"}},
			Probes: []v1alpha1.PodContainerProbe{{
				Name: "idle", ContainerName: "main", PodConditionType: "game.io/idle",
				Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}},
				MarkerPolicy: []v1alpha1.ProbeMarkerPolicy{{State: v1alpha1.ProbeSucceeded, Labels: map[string]string{"gameserver-idle": "true"}}},
			}},
		},
	}
}

func httpGet(mut func(*corev1.HTTPGetAction)) func(*v1alpha1.PodProbeMarker) {
	return func(m *v1alpha1.PodProbeMarker) {
		h := &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}
		mut(h)
		m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{HTTPGet: h}
	}
}

func secondProbe(m *v1alpha1.PodProbeMarker) *v1alpha1.PodContainerProbe {
	p := m.Spec.Probes[0]
	p.Name, p.PodConditionType = "busy", "game.io/busy"
	m.Spec.Probes = append(m.Spec.Probes, p)
	return &m.Spec.Probes[1]
}

// Every rejection rule of the shared validation, through the real API server. Some rules are
// also in the CRD schema, which the API server checks first; the field path reaches the user
// either way, which is what matters.
func TestPodProbeMarkerValidationTable(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	p0 := "spec.probes[0]"
	big := strings.Repeat("x", 256*1024)
	cases := []struct {
		name    string
		mut     func(*v1alpha1.PodProbeMarker)
		field   string // the field path the error names
		webhook bool   // only the webhook can catch it (the schema cannot)
	}{
		{"empty selector", func(m *v1alpha1.PodProbeMarker) { m.Spec.Selector = &metav1.LabelSelector{} }, "spec.selector", false},
		{"bad selector expression", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}}
		}, "spec.selector.matchExpressions[0].values", true},
		{"no probes", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes = nil }, "spec.probes", false},
		{"probe name with #", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "a#b" }, p0 + ".name", false},
		{"probe name with a control character", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Name = "a\x1bb" }, p0 + ".name", true},
		{"negative terminationGracePeriodSeconds", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.TerminationGracePeriodSeconds = ptr.To[int64](-1)
		}, p0 + ".probe.terminationGracePeriodSeconds", true},
		{"HTTP/2 (h2c) with HTTPS", httpGet(func(h *corev1.HTTPGetAction) {
			h.Protocol, h.Scheme = ptr.To(corev1.HTTPProtocolHTTP2), corev1.URISchemeHTTPS
		}), p0 + ".probe.httpGet.protocol", true},
		{"unknown HTTP protocol", httpGet(func(h *corev1.HTTPGetAction) { h.Protocol = ptr.To(corev1.HTTPProtocol("HTTP3")) }), p0 + ".probe.httpGet.protocol", true},
		{"unknown gRPC mode", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090, Mode: ptr.To(corev1.GRPCProbeMode("mTLS"))}}
		}, p0 + ".probe.grpc.mode", true},
		{"httpGet URL as path", httpGet(func(h *corev1.HTTPGetAction) { h.Path = "http://evil.example/x" }), p0 + ".probe.httpGet.path", true},
		{"duplicate probe name", func(m *v1alpha1.PodProbeMarker) { secondProbe(m).Name = "idle" }, "spec.probes[1]", false},
		{"container name not a DNS label", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].ContainerName = "Main" }, p0 + ".containerName", true},
		{"no handler", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{} }, p0 + ".probe", true},
		{"two handlers", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.HTTPGet = &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}
		}, p0 + ".probe.tcpSocket", true}, // the second handler in exec, httpGet, tcpSocket, grpc order
		{"exec without command", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{}}
		}, p0 + ".probe.exec.command", true},
		{"exec with empty program", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"", "x"}}}
		}, p0 + ".probe.exec.command[0]", true},
		{"httpGet host", httpGet(func(h *corev1.HTTPGetAction) { h.Host = "169.254.169.254" }), p0 + ".probe.httpGet.host", true},
		{"httpGet path naming a host", httpGet(func(h *corev1.HTTPGetAction) { h.Path = "//evil.example/x" }), p0 + ".probe.httpGet.path", true},
		{"httpGet port 0", httpGet(func(h *corev1.HTTPGetAction) { h.Port = intstr.FromInt32(0) }), p0 + ".probe.httpGet.port", true},
		{"httpGet port too big", httpGet(func(h *corev1.HTTPGetAction) { h.Port = intstr.FromInt32(70000) }), p0 + ".probe.httpGet.port", true},
		{"httpGet port number as string", httpGet(func(h *corev1.HTTPGetAction) { h.Port = intstr.FromString("80") }), p0 + ".probe.httpGet.port", true},
		{"httpGet bad port name", httpGet(func(h *corev1.HTTPGetAction) { h.Port = intstr.FromString("Bad_Name") }), p0 + ".probe.httpGet.port", true},
		{"httpGet scheme", httpGet(func(h *corev1.HTTPGetAction) { h.Scheme = "FTP" }), p0 + ".probe.httpGet.scheme", true},
		{"header name", httpGet(func(h *corev1.HTTPGetAction) { h.HTTPHeaders = []corev1.HTTPHeader{{Name: "bad header", Value: "x"}} }),
			p0 + ".probe.httpGet.httpHeaders[0].name", true},
		{"header value with newline", httpGet(func(h *corev1.HTTPGetAction) { h.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-A", Value: "a\r\nB: c"}} }),
			p0 + ".probe.httpGet.httpHeaders[0].value", true},
		{"tcpSocket host", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.TCPSocket.Host = "10.0.0.1" }, p0 + ".probe.tcpSocket.host", true},
		{"tcpSocket port 0", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.TCPSocket.Port = intstr.FromInt32(0) }, p0 + ".probe.tcpSocket.port", true},
		{"grpc port 0", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{GRPC: &corev1.GRPCAction{}}
		}, p0 + ".probe.grpc.port", true},
		{"grpc port too big", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 70000}}
		}, p0 + ".probe.grpc.port", true},
		{"negative initialDelaySeconds", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.InitialDelaySeconds = -1 }, p0 + ".probe.initialDelaySeconds", true},
		{"negative timeoutSeconds", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.TimeoutSeconds = -1 }, p0 + ".probe.timeoutSeconds", true},
		{"negative periodSeconds", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.PeriodSeconds = -1 }, p0 + ".probe.periodSeconds", true},
		{"negative successThreshold", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.SuccessThreshold = -1 }, p0 + ".probe.successThreshold", true},
		{"negative failureThreshold", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].Probe.FailureThreshold = -1 }, p0 + ".probe.failureThreshold", true},
		{"condition type not qualified", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].PodConditionType = "not ok" }, p0 + ".podConditionType", true},
		{"built-in condition type", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].PodConditionType = "Ready" }, p0 + ".podConditionType", true},
		// Reserved keys: the keys that drive probeshim, OpenKruise and Kubernetes, written onto
		// pods with no access check, would let a marker author do what they unlock.
		{"the enhanced liveness opt-in", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations = map[string]string{v1alpha1.AnnotationUsingEnhancedLiveness: "true"}
		}, p0 + ".markerPolicy[0].annotations[apps.kruise.io/using-enhanced-liveness]", true},
		{"the liveness probe context", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations = map[string]string{
				v1alpha1.AnnotationContainerProbeContext: `[{"name":"main","livenessProbe":{"exec":{"command":["id"]}}}]`}
		}, p0 + ".markerPolicy[0].annotations[apps.kruise.io/container-probe-context]", true},
		{"a kubernetes.io subdomain label", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Labels = map[string]string{"node-role.kubernetes.io/x": "y"}
		}, p0 + ".markerPolicy[0].labels[node-role.kubernetes.io/x]", true},
		{"OpenKruise's readiness gate", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].PodConditionType = "KruisePodReady" }, p0 + ".podConditionType", true},
		{"duplicate condition type", func(m *v1alpha1.PodProbeMarker) { secondProbe(m).PodConditionType = "game.io/idle" }, "spec.probes[1].podConditionType", true},
		{"duplicate policy state", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy = append(m.Spec.Probes[0].MarkerPolicy, m.Spec.Probes[0].MarkerPolicy[0])
		}, p0 + ".markerPolicy[1]", false},
		{"policy state Unknown", func(m *v1alpha1.PodProbeMarker) { m.Spec.Probes[0].MarkerPolicy[0].State = v1alpha1.ProbeUnknown }, p0 + ".markerPolicy[0].state", false},
		{"policy without labels or annotations", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Labels = nil
		}, p0 + ".markerPolicy[0]", true},
		{"label key", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Labels = map[string]string{"bad key": "x"}
		}, p0 + ".markerPolicy[0].labels[bad key]", true},
		{"label value", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Labels = map[string]string{"ok": "not ok!"}
		}, p0 + ".markerPolicy[0].labels[ok]", true},
		{"annotation key", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations = map[string]string{"a/b/c": "x"}
		}, p0 + ".markerPolicy[0].annotations[a/b/c]", true},
		{"annotations too large", func(m *v1alpha1.PodProbeMarker) {
			m.Spec.Probes[0].MarkerPolicy[0].Annotations = map[string]string{"big": big}
		}, p0 + ".markerPolicy[0].annotations", true},
		{"unknown choice for a silent node service", func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationOnNodeServiceSilent: "Keep"}
		}, "metadata.annotations[probeshim.io/on-node-service-silent]", true},
		{"dry run not true or false", func(m *v1alpha1.PodProbeMarker) {
			m.Annotations = map[string]string{v1alpha1.AnnotationDryRun: "yes"}
		}, "metadata.annotations[probeshim.io/dry-run]", true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := validMarker(fmt.Sprintf("invalid-%d", i))
			tc.mut(m)
			err := testEnv.admin.Create(ctx, m)
			if err == nil {
				t.Fatalf("created %s", m.Name)
			}
			if !apierrors.IsInvalid(err) {
				t.Errorf("not an Invalid error: %v", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error does not name %s: %v", tc.field, err)
			}
			if tc.webhook && !strings.Contains(err.Error(), ppmWebhook) {
				t.Errorf("not rejected by the webhook: %v", err)
			}
			if tc.webhook && !hasCause(err, tc.field) {
				t.Errorf("no status cause on %s: %+v", tc.field, err.(apierrors.APIStatus).Status().Details)
			}
		})
	}

	// The valid base passes, so each rejection above is its one change.
	if err := testEnv.admin.Create(ctx, validMarker("valid")); err != nil {
		t.Fatalf("valid marker rejected: %v", err)
	}
}

func hasCause(err error, fieldPath string) bool {
	st, ok := err.(apierrors.APIStatus)
	if !ok || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if strings.HasPrefix(c.Field, fieldPath) {
			return true
		}
	}
	return false
}

func TestPodProbeMarkerSelectorImmutable(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	m := validMarker("immutable")
	if err := testEnv.admin.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	// The CRD's CEL rule rejects this before the webhook sees it; the webhook checks it again
	// (TestPodProbeMarkerUpdateRules) for the day the schema loses the rule.
	err := testEnv.admin.Update(ctx, m)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector") || !strings.Contains(err.Error(), "field is immutable") {
		t.Fatalf("selector change: %v", err)
	}
	// Everything else may change.
	if err := testEnv.admin.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Probes[0].Probe.PeriodSeconds = 3
	m.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gs"}} // same as before, rewritten
	if err := testEnv.admin.Update(ctx, m); err != nil {
		t.Fatalf("update keeping the selector: %v", err)
	}
}

func execMarker(name string, cmd ...string) *v1alpha1.PodProbeMarker {
	m := validMarker(name)
	m.Spec.Probes[0].Probe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}
	return m
}

// The pods/exec check, with users the real RBAC authorizer knows: alice may edit markers but not
// exec, bob may do both, carol may exec through a group.
func TestPodProbeMarkerExecPermission(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	// Not "*": that includes the verb exec, which admits exec markers by itself.
	markers := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"podprobemarkers"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
	exec := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}}
	for _, u := range []string{"alice", "bob", "carol"} {
		grant(t, "games", u, markers)
	}
	grant(t, "games", "bob", exec)
	grant(t, "games", "group:game-ops", exec)
	alice, bob, carol := as(t, "alice"), as(t, "bob"), as(t, "carol", "game-ops")

	// RBAC bindings reach the authorizer through an informer: wait until bob's works.
	poll.Eventually(t, 10*time.Second, func() error {
		err := bob.Create(ctx, execMarker("bob-idle", "cat", "/tmp/idle"))
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})

	err := alice.Create(ctx, execMarker("alice-idle", "cat", "/tmp/idle"))
	want := "user alice may not create pods/exec in namespace games; exec probes run commands inside containers"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "spec.probes[0].probe.exec") || !strings.Contains(err.Error(), ppmWebhook) {
		t.Errorf("alice's exec marker: %v", err)
	}
	if err := alice.Create(ctx, validMarker("alice-tcp")); err != nil {
		t.Errorf("alice's marker without exec probes: %v", err)
	}
	if err := carol.Create(ctx, execMarker("carol-idle", "true")); err != nil {
		t.Errorf("carol may exec through her group: %v", err)
	}

	// alice may edit bob's marker as long as the exec probes stay as they are...
	m := &v1alpha1.PodProbeMarker{}
	if err := alice.Get(ctx, client.ObjectKeyFromObject(execMarker("bob-idle")), m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Probes[0].Probe.PeriodSeconds = 7
	m.Spec.Probes = append(m.Spec.Probes, validMarker("").Spec.Probes[0])
	m.Spec.Probes[1].Name, m.Spec.Probes[1].PodConditionType = "up", "game.io/up"
	if err := alice.Update(ctx, m); err != nil {
		t.Fatalf("alice's update that leaves the exec probe alone: %v", err)
	}
	// ...but not change a command.
	m.Spec.Probes[0].Probe.Exec.Command = []string{"sh", "-c", "id"}
	if err := alice.Update(ctx, m); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("alice changing an exec command: %v", err)
	}
	if err := bob.Update(ctx, m); err != nil {
		t.Errorf("bob changing an exec command: %v", err)
	}

	// Turning the exec probes exec-free, or back, changes how the command runs: the same right
	// as writing it.
	m.Spec.Probes[0].Probe.Exec.Command = []string{"cat", "/tmp/idle"}
	if err := bob.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"true", "false"} {
		m.Annotations = map[string]string{v1alpha1.AnnotationExecFree: v}
		err := alice.Update(ctx, m)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "metadata.annotations[probeshim.io/exec-free]") {
			t.Errorf("alice setting %s=%s: %v", v1alpha1.AnnotationExecFree, v, err)
		}
		if err := bob.Update(ctx, m); err != nil {
			t.Errorf("bob setting %s=%s: %v", v1alpha1.AnnotationExecFree, v, err)
		}
	}
}

// kruise-game's case: a ServiceAccount without pods/exec, bound to the opt-in ClusterRole of
// cluster/deploy/rbac-exec-markers.yaml, creates and changes exec markers; without the binding it
// may not, and the role grants nothing else (no pods/exec).
func TestPodProbeMarkerExecMarkersRole(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	objs, err := loadManifests(testEnv.scheme, "rbac-exec-markers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%d objects in rbac-exec-markers.yaml, want the one ClusterRole", len(objs))
	}
	role := objs[0].(*rbacv1.ClusterRole)
	if err := testEnv.admin.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	const sa = "system:serviceaccount:kruise-game-system:kruise-game-controller-manager"
	const other = "system:serviceaccount:kruise-game-system:other"
	writeMarkers := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"podprobemarkers"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
	grant(t, "games", sa, writeMarkers)
	grant(t, "games", other, writeMarkers)
	if err := testEnv.admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kruise-game-exec-markers", Namespace: "games"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kruise-game-system",
			Name: "kruise-game-controller-manager"}},
	}); err != nil {
		t.Fatal(err)
	}
	game, otherClient := as(t, sa, "system:serviceaccounts"), as(t, other, "system:serviceaccounts")

	// A marker as kruise-game writes it for a GameServerSet with an exec serviceQuality.
	gss := execMarker("gss-minecraft", "bash", "./healthy.sh")
	gss.Spec.Probes[0].Name, gss.Spec.Probes[0].PodConditionType, gss.Spec.Probes[0].MarkerPolicy =
		"healthy", "game.kruise.io/healthy", nil
	poll.Eventually(t, 10*time.Second, func() error {
		err := game.Create(ctx, gss.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	m := &v1alpha1.PodProbeMarker{}
	if err := game.Get(ctx, client.ObjectKeyFromObject(gss), m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Probes[0].Probe.Exec.Command = []string{"bash", "./idle.sh"}
	if err := game.Update(ctx, m); err != nil {
		t.Errorf("kruise-game changing its exec command: %v", err)
	}

	err = otherClient.Create(ctx, execMarker("other-idle", "true"))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not create pods/exec") ||
		!strings.Contains(err.Error(), "probeshim-exec-markers") {
		t.Errorf("an exec marker without the role: %v", err)
	}

	// The role is exactly "may create exec markers": no pods/exec.
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: sa, Groups: []string{"system:serviceaccounts", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "games", Verb: "create", Resource: "pods", Subresource: "exec"}}}
	if err := testEnv.admin.Create(ctx, sar); err != nil {
		t.Fatal(err)
	}
	if sar.Status.Allowed {
		t.Error("the exec-markers role grants pods/exec")
	}
}

// The pods/portforward check for probes naming the pod's loopback, with users the real RBAC
// authorizer knows: dave may edit markers but not port-forward, erin may do both.
func TestPodProbeMarkerPortForwardPermission(t *testing.T) {
	needEnv(t)
	ctx := context.Background()
	markers := rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"podprobemarkers"}, Verbs: []string{"*"}}
	portforward := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}}
	grant(t, "games", "dave", markers)
	grant(t, "games", "erin", markers, portforward)
	dave, erin := as(t, "dave"), as(t, "erin")
	loopback := func(name string) *v1alpha1.PodProbeMarker {
		m := validMarker(name)
		m.Spec.Probes[0].Probe.TCPSocket.Host = "127.0.0.1"
		return m
	}

	poll.Eventually(t, 10*time.Second, func() error {
		err := erin.Create(ctx, loopback("erin-admin"))
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	err := dave.Create(ctx, loopback("dave-admin"))
	want := "user dave may not create pods/portforward in namespace games; probes naming 127.0.0.1 or localhost reach the pod's own loopback"
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "spec.probes[0].probe.tcpSocket.host") || !strings.Contains(err.Error(), ppmWebhook) {
		t.Errorf("dave's loopback marker: %v", err)
	}
	// Without a host the probe goes to the pod IP: no portforward right needed.
	if err := dave.Create(ctx, validMarker("dave-pod-ip")); err != nil {
		t.Errorf("dave's marker probing the pod IP: %v", err)
	}
	// Nor may dave point an existing probe at loopback.
	m := &v1alpha1.PodProbeMarker{}
	if err := dave.Get(ctx, client.ObjectKeyFromObject(validMarker("dave-pod-ip")), m); err != nil {
		t.Fatal(err)
	}
	m.Spec.Probes[0].Probe.TCPSocket.Host = "localhost"
	if err := dave.Update(ctx, m); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("dave pointing a probe at loopback: %v", err)
	}
}
