// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package deploy holds the kustomize manifests of the cluster deployment; this test builds them
// with kubectl, checks that the names agree with the code, that the deployment's RBAC covers
// what the controllers declare, and that a real API server accepts every object.
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/cluster/webhook"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

const namespace = "probeshim-system"

// leaseNamespace holds the node services' heartbeat leases: shim/heartbeat.DefaultNamespace (the
// cluster part cannot import the node's packages; keep the two in step).
const leaseNamespace = "probeshim-node-lease"

func build(t *testing.T, bin string) []client.Object {
	t.Helper()
	return buildDir(t, bin, ".")
}

func buildDir(t *testing.T, bin, dir string) []client.Object {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	dec := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	var objs []client.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if runtime.IsNotRegisteredError(err) { // e.g. cert-manager's kinds
			u := &unstructured.Unstructured{}
			obj, err = u, u.UnmarshalJSON(mustJSON(t, doc))
		}
		if err != nil {
			t.Fatalf("decoding the kustomize output: %v", err)
		}
		objs = append(objs, obj.(client.Object))
	}
}

func mustJSON(t *testing.T, doc []byte) []byte {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func find[T client.Object](objs []client.Object, name string) T {
	var zero T
	for _, o := range objs {
		if t, ok := o.(T); ok && o.GetName() == name {
			return t
		}
	}
	return zero
}

func TestManifests(t *testing.T) {
	bin, err := kubebin.Dir("kubectl", "kube-apiserver", "etcd")
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	objs := build(t, bin)

	kinds := map[string]int{}
	for _, o := range objs {
		kind := fmt.Sprintf("%T", o)
		kinds[kind]++
		// probeshim-node-lease holds the node services' heartbeat Leases, and the Roles for them;
		// in kube-system only the binding to read the API server's client CA (the heartbeat relay).
		clientCA := o.GetName() == "probeshim-cluster-client-ca" && fmt.Sprintf("%T", o) == "*v1.RoleBinding"
		if ns := o.GetNamespace(); ns != "" && ns != namespace && ns != "probeshim-node-lease" && !(ns == "kube-system" && clientCA) {
			t.Errorf("%s %s in namespace %s", kind, o.GetName(), ns)
		}
	}
	if kinds["*v1.CustomResourceDefinition"] != 3 {
		t.Errorf("%d CRDs, want 3 (../../apis/crds)", kinds["*v1.CustomResourceDefinition"])
	}

	svc := find[*corev1.Service](objs, "probeshim-webhook")
	dep := find[*appsv1.Deployment](objs, "probeshim-cluster")
	if svc == nil || dep == nil {
		t.Fatal("no webhook Service or Deployment")
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, the Deployment's pods do not have it", k, v)
		}
	}

	// Every webhook calls the Service on a path the handlers are registered on.
	paths := []string{webhook.PathPodLiveness, webhook.PathPodReadinessGate, webhook.PathPodReadinessGate, // mutating
		webhook.PathPodProbeMarkerDefaults, webhook.PathContainerRecreateRequestMutate,
		webhook.PathPodProbeMarker, webhook.PathNodePodProbe, webhook.PathContainerRecreateRequestValidate} // validating
	var configs []admissionregistrationv1.WebhookClientConfig
	var policies []admissionregistrationv1.FailurePolicyType
	if m := find[*admissionregistrationv1.MutatingWebhookConfiguration](objs, "probeshim"); m != nil {
		for _, w := range m.Webhooks {
			configs, policies = append(configs, w.ClientConfig), append(policies, *w.FailurePolicy)
		}
	}
	if v := find[*admissionregistrationv1.ValidatingWebhookConfiguration](objs, "probeshim"); v != nil {
		for _, w := range v.Webhooks {
			configs, policies = append(configs, w.ClientConfig), append(policies, *w.FailurePolicy)
		}
	}
	if len(configs) != len(paths) {
		t.Fatalf("%d webhooks, want %d", len(configs), len(paths))
	}
	for i, cc := range configs {
		s := cc.Service
		if s == nil || s.Name != svc.Name || s.Namespace != svc.Namespace || *s.Port != svc.Spec.Ports[0].Port || *s.Path != paths[i] {
			t.Errorf("webhook %d calls %+v, want %s/%s:%d%s", i, s, svc.Namespace, svc.Name, svc.Spec.Ports[0].Port, paths[i])
		}
		// Fail everywhere but the readiness gate: without it a pod only is not made unready
		// during a request's grace (see webhooks.yaml), with Fail opted-in pods could not start.
		want := admissionregistrationv1.Fail
		if s != nil && *s.Path == webhook.PathPodReadinessGate {
			want = admissionregistrationv1.Ignore
		}
		if policies[i] != want {
			t.Errorf("webhook %d: failurePolicy %s, want %s", i, policies[i], want)
		}
	}

	// The policy bindings read the parameters the deployment writes.
	for _, name := range []string{"probeshim-nodepodprobe-writers", "probeshim-crr-status-writers", "probeshim-node-lease-writers"} {
		b := find[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, name)
		if b == nil || b.Spec.PolicyName != name || b.Spec.ParamRef.Name != webhook.PolicyParamsName || b.Spec.ParamRef.Namespace != namespace {
			t.Errorf("binding %s: %+v", name, b)
		}
		if find[*admissionregistrationv1.ValidatingAdmissionPolicy](objs, name) == nil {
			t.Errorf("no policy %s", name)
		}
	}
}

// The cert-manager component switches the certificate to cert-manager and keeps it where the
// webhook server reads it.
func TestCertManagerComponent(t *testing.T) {
	bin, err := kubebin.Dir("kubectl", "kube-apiserver", "etcd")
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, here) // kustomize wants relative paths
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("resources: [%q]\ncomponents: [%q]\n", rel, filepath.Join(rel, "cert-manager"))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := buildDir(t, bin, dir)
	m := find[*admissionregistrationv1.MutatingWebhookConfiguration](objs, "probeshim")
	v := find[*admissionregistrationv1.ValidatingWebhookConfiguration](objs, "probeshim")
	for _, o := range []client.Object{m, v} {
		if o.GetAnnotations()["cert-manager.io/inject-ca-from"] != namespace+"/probeshim-webhook" {
			t.Errorf("%T: annotations %v", o, o.GetAnnotations())
		}
	}
	dep := find[*appsv1.Deployment](objs, "probeshim-cluster")
	vol := dep.Spec.Template.Spec.Volumes[0]
	if vol.Name != "certs" || vol.EmptyDir != nil || vol.Secret == nil || vol.Secret.SecretName != "probeshim-webhook-certs" {
		t.Errorf("certs volume %+v", vol)
	}
	if len(dep.Spec.Template.Spec.Containers[0].Args) != len(find[*appsv1.Deployment](build(t, bin), "probeshim-cluster").Spec.Template.Spec.Containers[0].Args) {
		t.Error("the component changed the Deployment's args; --cert-mode=auto is meant to notice cert-manager by itself")
	}
}

// The beside-kruise component leaves Kruise's CRDs alone and everything else in.
func TestBesideKruiseComponent(t *testing.T) {
	bin, err := kubebin.Dir("kubectl", "kube-apiserver", "etcd")
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, here)
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("resources: [%q]\ncomponents: [%q]\n", rel, filepath.Join(rel, "beside-kruise"))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	all, beside := build(t, bin), buildDir(t, bin, dir)
	crds := 0
	for _, o := range all {
		if o.GetObjectKind().GroupVersionKind().Kind == "CustomResourceDefinition" {
			crds++
		}
	}
	for _, o := range beside {
		if o.GetObjectKind().GroupVersionKind().Kind == "CustomResourceDefinition" {
			t.Errorf("installs CRD %s beside Kruise", o.GetName())
		}
	}
	if crds != 3 || len(beside) != len(all)-3 {
		t.Errorf("%d objects (%d CRDs), beside Kruise %d", len(all), crds, len(beside))
	}
}

// rbacMarker is a +kubebuilder:rbac line of the controllers.
var rbacMarker = regexp.MustCompile(`\+kubebuilder:rbac:groups=([^,]*),resources=([^,]*),verbs=(\S+)`)

// The deployment's ClusterRole grants what every controller declares it needs, so a controller
// change that needs more fails here rather than in a cluster.
func TestRBACCoversControllers(t *testing.T) {
	bin, err := kubebin.Dir("kubectl", "kube-apiserver", "etcd")
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	role := find[*rbacv1.ClusterRole](build(t, bin), "probeshim-cluster")
	if role == nil {
		t.Fatal("no ClusterRole probeshim-cluster")
	}
	allows := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if len(r.ResourceNames) == 0 && slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
				(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
				return true
			}
		}
		return false
	}
	n := 0
	walk := func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range rbacMarker.FindAllStringSubmatch(string(src), -1) {
			group := strings.Trim(m[1], `"`)
			for _, res := range strings.Split(m[2], ";") {
				for _, verb := range strings.Split(m[3], ";") {
					n++
					if !allows(group, res, verb) {
						t.Errorf("%s declares %s %s.%s, which the ClusterRole does not grant", path, verb, res, group)
					}
				}
			}
		}
		return nil
	}
	for _, dir := range []string{"../controller", "../decider"} {
		if err := filepath.WalkDir(dir, walk); err != nil {
			t.Fatal(err)
		}
	}
	if n == 0 {
		t.Skip("no +kubebuilder:rbac markers in ../controller or ../decider")
	}
}

// A real API server accepts every object of the build (schemas, CEL of the admission policies).
func TestManifestsApply(t *testing.T) {
	applied(t)
}

// applied starts a real API server, creates every object of the build on it (each refusal is an
// error of t) and returns a client of it as the admin, and its config. The server stops with t.
func applied(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	bin, err := kubebin.Dir("kubectl", "kube-apiserver", "etcd")
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	objs := build(t, bin)
	logf.SetLogger(logr.Discard())
	env := kubebin.Environment(bin)
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Namespace and CRDs first, as kubectl apply orders them.
	slices.SortStableFunc(objs, func(a, b client.Object) int { return rank(a) - rank(b) })
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Errorf("%T %s: %v", o, o.GetName(), err)
		}
	}
	return c, cfg
}

// TestNodeLeaseRBAC: the lease namespace exists and both node identities may get, create, update
// and patch its leases (the node service's heartbeat) and get the relay's ConfigMap, and get their
// Node (the lease's owner).
func TestNodeLeaseRBAC(t *testing.T) {
	bin, err := kubebin.Dir("kubectl")
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	objs := build(t, bin)
	if find[*corev1.Namespace](objs, leaseNamespace) == nil {
		t.Errorf("no namespace %s", leaseNamespace)
	}
	role := find[*rbacv1.Role](objs, "probeshim-node-lease")
	binding := find[*rbacv1.RoleBinding](objs, "probeshim-node-lease")
	if role == nil || binding == nil || role.Namespace != leaseNamespace || binding.Namespace != leaseNamespace {
		t.Fatalf("no Role and RoleBinding probeshim-node-lease in %s: %v, %v", leaseNamespace, role, binding)
	}
	// And the one ConfigMap that says where the heartbeat relay is (nodes on the kubelet's identity).
	want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		Verbs: []string{"get", "create", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"probeshim-heartbeat"}, Verbs: []string{"get"}}}
	if fmt.Sprint(role.Rules) != fmt.Sprint(want) {
		t.Errorf("lease Role rules = %v, want %v", role.Rules, want)
	}
	var groups []string
	for _, s := range binding.Subjects {
		if s.Kind == rbacv1.GroupKind {
			groups = append(groups, s.Name)
		}
	}
	if binding.RoleRef.Name != role.Name || !slices.Equal(groups, []string{"system:nodes", "probeshim:nodes"}) {
		t.Errorf("lease RoleBinding = %+v, want the Role bound to system:nodes and probeshim:nodes", binding)
	}
	nodes := find[*rbacv1.ClusterRole](objs, "probeshim-node-nodes")
	nodesBinding := find[*rbacv1.ClusterRoleBinding](objs, "probeshim-node-nodes")
	if nodes == nil || nodesBinding == nil || fmt.Sprint(nodes.Rules) != fmt.Sprint([]rbacv1.PolicyRule{{APIGroups: []string{""},
		Resources: []string{"nodes"}, Verbs: []string{"get"}}}) || len(nodesBinding.Subjects) != 1 || nodesBinding.Subjects[0].Name != "probeshim:nodes" {
		t.Errorf("probeshim-node-nodes = %+v, %+v; want get nodes for probeshim:nodes", nodes, nodesBinding)
	}
}

func rank(o client.Object) int {
	switch o.(type) {
	case *corev1.Namespace:
		return 0
	case *apiextensionsv1.CustomResourceDefinition:
		return 1
	}
	return 2
}
