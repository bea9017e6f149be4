// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package charts holds the Helm chart of the cluster part (charts/probeshim). Its tests lint the
// chart and render it with the Helm SDK (no helm binary): with default values it must render
// exactly what the kustomize manifests in cluster/deploy apply, but for what is meant to differ,
// and its values must reach the objects they are for.
package charts

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const (
	chartDir  = "probeshim"
	namespace = "probeshim-system"
	// The Kubernetes version the rig and envtest run.
	kubeVersion = "v1.37.2"
)

// TestLint runs Helm's linter (what `helm lint --strict` runs) with default and other values.
func TestLint(t *testing.T) {
	for name, vals := range valueSets() {
		t.Run(name, func(t *testing.T) {
			kv, err := chartutil.ParseKubeVersion(kubeVersion)
			if err != nil {
				t.Fatal(err)
			}
			res := lint.AllWithKubeVersion(chartDir, vals, namespace, kv)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
		})
	}
}

func valueSets() map[string]map[string]any {
	return map[string]map[string]any{
		"defaults": nil,
		"cert-manager, digest, kubelet identity only": {
			"certManager":  map[string]any{"enabled": true},
			"image":        map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)},
			"nodeIdentity": map[string]any{"dedicated": map[string]any{"enabled": false}},
		},
		"dedicated identity only, metrics service": {
			"nodeIdentity": map[string]any{"kubelet": false},
			"metrics":      map[string]any{"service": map[string]any{"enabled": true}},
		},
		"monitoring, no uninstall guard": {
			"monitoring":     map[string]any{"enabled": true, "prometheusServiceAccount": map[string]any{"name": "prometheus", "namespace": "monitoring"}},
			"uninstallGuard": map[string]any{"enabled": false},
		},
		"no relay, own kruise settings, exec markers role, no CRDs": {
			"heartbeatRelay":  map[string]any{"enabled": false},
			"webhook":         map[string]any{"servicePort": 8443},
			"kruise":          map[string]any{"namespace": "example-kruise", "detectPeriod": "0s", "keepPeriod": "5s"},
			"execMarkersRole": map[string]any{"enabled": true},
			"crds":            map[string]any{"install": false},
		},
	}
}

// TestDefaultsMatchKustomize renders the chart with its default values and compares it object by
// object with `kustomize build cluster/deploy`. The chart is written by hand from those manifests;
// this is what keeps the two from drifting. Meant to differ, and normalised before comparing:
//   - the labels Helm's convention adds (managed-by, instance, version, helm.sh/chart);
//   - the CRDs' helm.sh/resource-policy: keep (uninstalling must not delete every object);
//   - the Namespace probeshim-system: Helm's (`helm install --create-namespace`), not the chart's;
//   - the image and its pull policy (the manifests run the rig's locally imported image);
//   - the decider's config.yaml is compared as YAML (the manifest's copy has comments);
//   - runs of white space in strings count as one space: kustomize's YAML library reads the folded
//     CEL expressions' more-indented lines with an extra line break, Helm's does not.
func TestDefaultsMatchKustomize(t *testing.T) {
	want := index(t, kustomize(t))
	got := index(t, render(t, nil))

	delete(want, "Namespace//"+namespace)
	for _, o := range got {
		labels := o.GetLabels()
		for _, k := range []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version", "helm.sh/chart"} {
			if _, ok := labels[k]; !ok {
				t.Errorf("%s: no label %s", key(o), k)
			}
			delete(labels, k)
		}
		o.SetLabels(labels)
		if o.GetKind() == "CustomResourceDefinition" {
			a := o.GetAnnotations()
			if a["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s: not kept on uninstall (annotation helm.sh/resource-policy: keep)", key(o))
			}
			delete(a, "helm.sh/resource-policy")
			o.SetAnnotations(a)
		}
	}
	for _, objs := range []map[string]*unstructured.Unstructured{want, got} {
		if d := objs["Deployment/"+namespace+"/probeshim-cluster"]; d != nil {
			ctrs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
			for _, c := range ctrs {
				delete(c.(map[string]any), "image")
				delete(c.(map[string]any), "imagePullPolicy")
			}
			_ = unstructured.SetNestedSlice(d.Object, ctrs, "spec", "template", "spec", "containers")
		}
		if cm := objs["ConfigMap/"+namespace+"/probeshim-liveness-decider"]; cm != nil {
			s, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
			var v any
			if err := yaml.Unmarshal([]byte(s), &v); err != nil {
				t.Fatalf("decider config: %v", err)
			}
			_ = unstructured.SetNestedField(cm.Object, fmt.Sprint(v), "data", "config.yaml")
		}
	}

	for _, objs := range []map[string]*unstructured.Unstructured{want, got} {
		for _, o := range objs {
			o.Object = squashSpaces(o.Object).(map[string]any)
		}
	}

	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: in cluster/deploy, not rendered by the chart", k)
			continue
		}
		if !equality.Semantic.DeepEqual(want[k].Object, g.Object) {
			t.Errorf("%s differs between cluster/deploy and the chart (- kustomize, + chart):\n%s", k, diff(want[k], g))
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: rendered by the chart, not in cluster/deploy", k)
		}
	}
}

// The chart's CRDs are the generated ones: its copy (files/crds, written by `make generate`) is
// byte for byte apis/crds.
func TestCRDsAreGenerated(t *testing.T) {
	gen, err := filepath.Glob("../apis/crds/*.yaml")
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs in apis/crds: %v", err)
	}
	copies, err := filepath.Glob(filepath.Join(chartDir, "files/crds/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range copies {
		names = append(names, filepath.Base(c))
	}
	for _, g := range gen {
		name := filepath.Base(g)
		if !slices.Contains(names, name) {
			t.Errorf("charts/probeshim/files/crds/%s is missing: run 'make generate'", name)
			continue
		}
		a, _ := os.ReadFile(g)
		b, err := os.ReadFile(filepath.Join(chartDir, "files/crds", name))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("charts/probeshim/files/crds/%s differs from apis/crds: run 'make generate'", name)
		}
	}
	if len(copies) != len(gen) {
		t.Errorf("charts/probeshim/files/crds holds %v, apis/crds %d CRDs: run 'make generate'", names, len(gen))
	}
}

// Values reach the objects they are for.
func TestValues(t *testing.T) {
	t.Run("uninstall guard", func(t *testing.T) {
		hooks := renderHooks(t, map[string]any{"image": map[string]any{"repository": "r.example/x", "tag": "v1"}})
		job := find(t, hooks, "Job", "probeshim-uninstall-guard")
		if h := job.GetAnnotations()["helm.sh/hook"]; h != "pre-delete" {
			t.Errorf("hook %q, want pre-delete", h)
		}
		cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
		if len(cs) != 1 {
			t.Fatalf("containers %v", cs)
		}
		c := cs[0].(map[string]any)
		if c["image"] != "r.example/x:v1" || fmt.Sprint(c["command"]) != "[/bin/probeshim-cluster uninstall-check]" {
			t.Errorf("container runs %v %v", c["image"], c["command"])
		}
		if sa, _, _ := unstructured.NestedString(job.Object, "spec", "template", "spec", "serviceAccountName"); sa != "probeshim-cluster" {
			t.Errorf("service account %q", sa)
		}
		for _, o := range renderHooks(t, map[string]any{"uninstallGuard": map[string]any{"enabled": false}}) {
			if o.GetKind() == "Job" {
				t.Errorf("guard off renders %s", key(o))
			}
		}
	})
	t.Run("helm test", func(t *testing.T) {
		hooks := renderHooks(t, map[string]any{"image": map[string]any{"repository": "r.example/x", "tag": "v1"},
			"uninstallGuard": map[string]any{"enabled": false}, "nodeSelector": map[string]any{"pool": "system"}})
		if len(hooks) != 4 {
			t.Errorf("%d hooks, want the test's ServiceAccount, Role, RoleBinding and Pod", len(hooks))
		}
		for _, o := range hooks {
			a := o.GetAnnotations()
			if a["helm.sh/hook"] != "test" || !strings.Contains(a["helm.sh/hook-delete-policy"], "hook-succeeded") {
				t.Errorf("%s: annotations %v, want a test hook deleted when it passed", key(o), a)
			}
			if o.GetNamespace() != namespace || o.GetName() != "probeshim-selftest" {
				t.Errorf("%s: want probeshim-selftest in %s", key(o), namespace)
			}
		}
		pod := find(t, hooks, "Pod", "probeshim-selftest")
		if w := pod.GetAnnotations()["helm.sh/hook-weight"]; w != "" {
			t.Errorf("the Pod's hook weight %q: it must come after its RBAC (-1)", w)
		}
		spec, _, _ := unstructured.NestedMap(pod.Object, "spec")
		cs, _, _ := unstructured.NestedSlice(spec, "containers")
		c := cs[0].(map[string]any)
		if c["image"] != "r.example/x:v1" || fmt.Sprint(c["command"]) != "[/bin/probeshim-cluster selftest]" ||
			spec["serviceAccountName"] != "probeshim-selftest" || spec["restartPolicy"] != "Never" ||
			fmt.Sprint(spec["nodeSelector"]) != "map[pool:system]" {
			t.Errorf("the test Pod runs %v %v as %v (restart %v, nodes %v)", c["image"], c["command"], spec["serviceAccountName"], spec["restartPolicy"], spec["nodeSelector"])
		}
		rules, _, _ := unstructured.NestedSlice(find(t, hooks, "Role", "probeshim-selftest").Object, "rules")
		if fmt.Sprint(rules) != "[map[apiGroups:[apps.kruise.io] resources:[podprobemarkers] verbs:[create]]]" {
			t.Errorf("the test may %v; want create on podprobemarkers only (its dry run)", rules)
		}
		subs, _, _ := unstructured.NestedSlice(find(t, hooks, "RoleBinding", "probeshim-selftest").Object, "subjects")
		if fmt.Sprint(subs) != "[map[kind:ServiceAccount name:probeshim-selftest namespace:"+namespace+"]]" {
			t.Errorf("the test's RoleBinding binds %v", subs)
		}
	})
	t.Run("image tag defaults to appVersion", func(t *testing.T) {
		c := container(t, render(t, map[string]any{"image": map[string]any{"repository": "registry.example/p/probeshim-cluster"}}))
		ch, err := loader.Load(chartDir)
		if err != nil {
			t.Fatal(err)
		}
		if want := "registry.example/p/probeshim-cluster:" + ch.AppVersion(); c["image"] != want {
			t.Errorf("image %v, want %s", c["image"], want)
		}
		if c["imagePullPolicy"] != "IfNotPresent" {
			t.Errorf("imagePullPolicy %v", c["imagePullPolicy"])
		}
	})
	t.Run("image by digest", func(t *testing.T) {
		d := "sha256:" + strings.Repeat("0f", 32)
		c := container(t, render(t, map[string]any{"image": map[string]any{"repository": "r.example/x", "tag": "v1", "digest": d, "pullPolicy": "Always"}}))
		if c["image"] != "r.example/x:v1@"+d || c["imagePullPolicy"] != "Always" {
			t.Errorf("image %v, pull policy %v", c["image"], c["imagePullPolicy"])
		}
	})
	t.Run("bad digest refused", func(t *testing.T) {
		if _, err := renderErr(map[string]any{"image": map[string]any{"digest": "latest"}}); err == nil || !strings.Contains(err.Error(), "/image/digest") {
			t.Errorf("rendered with digest 'latest': %v", err)
		}
	})
	t.Run("replicas, resources, extra args", func(t *testing.T) {
		objs := render(t, map[string]any{
			"replicas":  3,
			"resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}},
			"extraArgs": []any{"--node-service-grace=90s"},
		})
		d := find(t, objs, "Deployment", "probeshim-cluster")
		if r, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(r) != "3" {
			t.Errorf("replicas %v", r)
		}
		c := container(t, objs)
		if m, _, _ := unstructured.NestedString(c, "resources", "limits", "memory"); m != "1Gi" {
			t.Errorf("memory limit %q", m)
		}
		if !slices.Contains(args(c), "--node-service-grace=90s") {
			t.Errorf("args %v", args(c))
		}
	})
	t.Run("webhook client certificate and network policy", func(t *testing.T) {
		objs := render(t, map[string]any{
			"webhook":       map[string]any{"clientAuth": map[string]any{"caConfigMap": "apiserver-webhook-client-ca", "names": []any{"kube-apiserver-admission", "apiserver"}}},
			"networkPolicy": map[string]any{"webhookFrom": []any{"10.0.0.0/24"}},
		})
		c := container(t, objs)
		for _, want := range []string{"--webhook-client-ca-file=/var/run/probeshim/webhook-client-ca/ca.crt", "--webhook-client-names=kube-apiserver-admission,apiserver"} {
			if !slices.Contains(args(c), want) {
				t.Errorf("args %v: want %s", args(c), want)
			}
		}
		d := find(t, objs, "Deployment", "probeshim-cluster")
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		if !strings.Contains(fmt.Sprint(vols), "apiserver-webhook-client-ca") {
			t.Errorf("volumes %v: want the CA ConfigMap", vols)
		}
		np := find(t, objs, "NetworkPolicy", "probeshim-cluster")
		from, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		if got := fmt.Sprint(from); !strings.Contains(got, "10.0.0.0/24") || strings.Contains(got, "0.0.0.0/0") {
			t.Errorf("ingress %v: want the webhook port from 10.0.0.0/24 only", got)
		}
		if objs := render(t, map[string]any{"networkPolicy": map[string]any{"enabled": false}}); slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "NetworkPolicy"
		}) {
			t.Error("a NetworkPolicy with networkPolicy.enabled false")
		}
	})
	t.Run("kubelet identity only", func(t *testing.T) {
		objs := render(t, map[string]any{"nodeIdentity": map[string]any{"dedicated": map[string]any{"enabled": false}}})
		a := args(container(t, objs))
		if !slices.Contains(a, "--node-group=") || !slices.Contains(a, "--node-user-prefix=") {
			t.Errorf("args %v: want the dedicated identities off", a)
		}
		for _, name := range []string{"probeshim-node", "probeshim-node-lease"} {
			if g := subjects(t, objs, name); !slices.Equal(g, []string{"system:nodes"}) {
				t.Errorf("%s binds %v, want [system:nodes]", name, g)
			}
		}
		for _, name := range []string{"probeshim-node-pods", "probeshim-node-nodes"} {
			for _, o := range objs {
				if o.GetName() == name {
					t.Errorf("%s %s rendered: only dedicated identities need it", o.GetKind(), name)
				}
			}
		}
	})
	t.Run("dedicated identity only, own group", func(t *testing.T) {
		objs := render(t, map[string]any{"nodeIdentity": map[string]any{"kubelet": false,
			"dedicated": map[string]any{"group": "example.com:nodes", "userPrefix": "example.com:node:"}}})
		a := args(container(t, objs))
		if !slices.Contains(a, "--node-group=example.com:nodes") || !slices.Contains(a, "--node-user-prefix=example.com:node:") {
			t.Errorf("args %v", a)
		}
		for _, name := range []string{"probeshim-node", "probeshim-node-lease", "probeshim-node-pods", "probeshim-node-nodes"} {
			if g := subjects(t, objs, name); !slices.Equal(g, []string{"example.com:nodes"}) {
				t.Errorf("%s binds %v, want [example.com:nodes]", name, g)
			}
		}
	})
	t.Run("no node identity refused", func(t *testing.T) {
		_, err := renderErr(map[string]any{"nodeIdentity": map[string]any{"kubelet": false, "dedicated": map[string]any{"enabled": false}}})
		if err == nil || !strings.Contains(err.Error(), "nodeIdentity") {
			t.Errorf("rendered with no node identity: %v", err)
		}
	})
	t.Run("cert-manager", func(t *testing.T) {
		objs := render(t, map[string]any{"certManager": map[string]any{"enabled": true}})
		find(t, objs, "Issuer", "probeshim-selfsigned")
		cert := find(t, objs, "Certificate", "probeshim-webhook")
		if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s != "probeshim-webhook-certs" {
			t.Errorf("certificate into Secret %q", s)
		}
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			if a := find(t, objs, kind, "probeshim").GetAnnotations()["cert-manager.io/inject-ca-from"]; a != namespace+"/probeshim-webhook" {
				t.Errorf("%s: inject-ca-from %q", kind, a)
			}
		}
		d := find(t, objs, "Deployment", "probeshim-cluster")
		vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		if s, _, _ := unstructured.NestedString(vols[0].(map[string]any), "secret", "secretName"); s != "probeshim-webhook-certs" {
			t.Errorf("certs volume %v, want the Secret probeshim-webhook-certs", vols[0])
		}
	})
	t.Run("another namespace", func(t *testing.T) {
		objs := renderNS(t, "example-system", nil)
		if !slices.Contains(args(container(t, objs)), "--service-account-username=system:serviceaccount:example-system:probeshim-cluster") {
			t.Errorf("args %v", args(container(t, objs)))
		}
		p := find(t, objs, "ValidatingAdmissionPolicy", "probeshim-pod-records")
		if !strings.Contains(fmt.Sprint(p.Object["spec"]), "system:serviceaccount:example-system:probeshim-cluster") {
			t.Errorf("probeshim-pod-records does not name the deployment in example-system")
		}
		for _, o := range objs {
			// The heartbeat relay's binding to kube-apiserver's Role for the client CA lives beside that Role.
			if o.GetKind() == "RoleBinding" && o.GetName() == "probeshim-cluster-client-ca" && o.GetNamespace() == "kube-system" {
				continue
			}
			if ns := o.GetNamespace(); ns != "" && ns != "example-system" && ns != "probeshim-node-lease" {
				t.Errorf("%s in namespace %s", key(o), ns)
			}
		}
	})
	t.Run("decider settings", func(t *testing.T) {
		objs := render(t, map[string]any{"decider": map[string]any{"dryRun": true, "rateLimit": map[string]any{"qps": 3}}})
		cm := find(t, objs, "ConfigMap", "probeshim-liveness-decider")
		s, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
		var cfg struct {
			Enabled   bool `json:"enabled"`
			DryRun    bool `json:"dryRun"`
			RateLimit struct {
				QPS   float64 `json:"qps"`
				Burst int     `json:"burst"`
			} `json:"rateLimit"`
		}
		if err := yaml.UnmarshalStrict([]byte(s), &cfg); err != nil && !strings.Contains(err.Error(), "unknown field") {
			t.Fatal(err)
		}
		if !cfg.Enabled || !cfg.DryRun || cfg.RateLimit.QPS != 3 || cfg.RateLimit.Burst != 5 {
			t.Errorf("decider config %+v from\n%s", cfg, s)
		}
	})
	t.Run("metrics off", func(t *testing.T) {
		c := container(t, render(t, map[string]any{"metrics": map[string]any{"port": 0}}))
		if !slices.Contains(args(c), "--metrics-bind-address=0") {
			t.Errorf("args %v", args(c))
		}
	})
	t.Run("metrics over HTTP", func(t *testing.T) {
		a := args(container(t, render(t, map[string]any{"metrics": map[string]any{"secure": false}})))
		if !slices.Contains(a, "--metrics-secure=false") {
			t.Errorf("args %v", a)
		}
		if a := args(container(t, render(t, nil))); slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--metrics-secure") }) {
			t.Errorf("args %v: HTTPS is the command's default", a)
		}
	})
	t.Run("metrics service", func(t *testing.T) {
		svc := find(t, render(t, map[string]any{"metrics": map[string]any{"service": map[string]any{"enabled": true}}}), "Service", "probeshim-metrics")
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		if len(ports) != 1 || ports[0].(map[string]any)["targetPort"] != "metrics" {
			t.Errorf("metrics Service ports %v", ports)
		}
	})
	t.Run("heartbeat relay off", func(t *testing.T) {
		objs := render(t, map[string]any{"heartbeatRelay": map[string]any{"enabled": false}})
		if !slices.Contains(args(container(t, objs)), "--heartbeat-relay=false") {
			t.Errorf("args %v", args(container(t, objs)))
		}
		for _, o := range objs {
			if o.GetName() == "probeshim-cluster-client-ca" {
				t.Errorf("%s rendered without the relay", key(o))
			}
		}
		find(t, render(t, nil), "RoleBinding", "probeshim-cluster-client-ca")
	})
	t.Run("webhook service port", func(t *testing.T) {
		objs := render(t, map[string]any{"webhook": map[string]any{"servicePort": 8443}})
		if !slices.Contains(args(container(t, objs)), "--webhook-service-port=8443") {
			t.Errorf("args %v", args(container(t, objs)))
		}
		ports, _, _ := unstructured.NestedSlice(find(t, objs, "Service", "probeshim-webhook").Object, "spec", "ports")
		if len(ports) != 1 || fmt.Sprint(ports[0].(map[string]any)["port"]) != "8443" {
			t.Errorf("webhook Service ports %v", ports)
		}
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			whs, _, _ := unstructured.NestedSlice(find(t, objs, kind, "probeshim").Object, "webhooks")
			for _, w := range whs {
				if p, _, _ := unstructured.NestedFieldNoCopy(w.(map[string]any), "clientConfig", "service", "port"); fmt.Sprint(p) != "8443" {
					t.Errorf("%s %v: port %v", kind, w.(map[string]any)["name"], p)
				}
			}
		}
	})
	t.Run("kruise detection", func(t *testing.T) {
		a := args(container(t, render(t, map[string]any{"kruise": map[string]any{"namespace": "example-kruise", "detectPeriod": "0s", "keepPeriod": "5s"}})))
		for _, want := range []string{"--kruise-namespace=example-kruise", "--kruise-detect-period=0s", "--kruise-keep-period=5s"} {
			if !slices.Contains(a, want) {
				t.Errorf("args %v: no %s", a, want)
			}
		}
	})
	t.Run("exec markers role", func(t *testing.T) {
		for _, o := range render(t, nil) {
			if o.GetName() == "probeshim-exec-markers" {
				t.Errorf("%s rendered by default", key(o))
			}
		}
		got := find(t, render(t, map[string]any{"execMarkersRole": map[string]any{"enabled": true}}), "ClusterRole", "probeshim-exec-markers")
		b, err := os.ReadFile("../cluster/deploy/rbac-exec-markers.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(want["rules"], got.Object["rules"]) {
			t.Errorf("rules %v, want those of cluster/deploy/rbac-exec-markers.yaml %v", got.Object["rules"], want["rules"])
		}
	})
	t.Run("CRDs off", func(t *testing.T) {
		for _, o := range render(t, map[string]any{"crds": map[string]any{"install": false}}) {
			if o.GetKind() == "CustomResourceDefinition" {
				t.Errorf("CRD %s rendered with crds.install false", o.GetName())
			}
		}
	})
	t.Run("CRDs off is cluster/deploy/beside-kruise", func(t *testing.T) {
		// The same objects as cluster/deploy with the component beside-kruise (its contents are
		// compared by TestDefaultsMatchKustomize), but for the Namespace Helm creates.
		dir := t.TempDir()
		root, err := filepath.Abs("../cluster/deploy")
		if err != nil {
			t.Fatal(err)
		}
		// kustomize takes only relative paths.
		rel, err := filepath.Rel(dir, root)
		if err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n", rel, filepath.Join(rel, "beside-kruise"))
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		want := index(t, kustomizeDir(t, dir))
		delete(want, "Namespace//"+namespace)
		got := index(t, render(t, map[string]any{"crds": map[string]any{"install": false}}))
		if w, g := sortedKeys(want), sortedKeys(got); !slices.Equal(w, g) {
			t.Errorf("objects differ (- beside-kruise, + chart):\n%s", cmp.Diff(w, g))
		}
	})
}

// ---- rendering ----

func render(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	return renderNS(t, namespace, vals)
}

func renderNS(t *testing.T, ns string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := renderIn(ns, vals)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, manifest)
}

func renderErr(vals map[string]any) (string, error) { return renderIn(namespace, vals) }

// renderHooks renders the chart's hooks (kept out of the release's manifest by Helm).
func renderHooks(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	rel, err := dryRun(namespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	var manifest strings.Builder
	for _, h := range rel.Hooks {
		manifest.WriteString("---\n" + h.Manifest + "\n")
	}
	return decode(t, manifest.String())
}

// renderIn renders the chart as `helm install --dry-run` does without a cluster (client only).
func renderIn(ns string, vals map[string]any) (string, error) {
	rel, err := dryRun(ns, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

func dryRun(ns string, vals map[string]any) (*release.Release, error) {
	return Render(chartDir, ns, kubeVersion, vals)
}

// kustomize builds cluster/deploy as `kubectl apply -k` does.
func kustomize(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return kustomizeDir(t, "../cluster/deploy")
}

func kustomizeDir(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, string(out))
}

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("decoding: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

func squashSpaces(v any) any {
	switch v := v.(type) {
	case string:
		return strings.Join(strings.Fields(v), " ")
	case map[string]any:
		for k, e := range v {
			v[k] = squashSpaces(e)
		}
	case []any:
		for i, e := range v {
			v[i] = squashSpaces(e)
		}
	}
	return v
}

func key(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func index(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if _, dup := m[key(o)]; dup {
			t.Errorf("%s twice", key(o))
		}
		m[key(o)] = o
	}
	return m
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// diff shows where the two objects differ.
func diff(a, b *unstructured.Unstructured) string {
	return cmp.Diff(a.Object, b.Object)
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func container(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	d := find(t, objs, "Deployment", "probeshim-cluster")
	ctrs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(ctrs) != 1 {
		t.Fatalf("%d containers", len(ctrs))
	}
	return ctrs[0].(map[string]any)
}

func args(c map[string]any) []string {
	a, _, _ := unstructured.NestedStringSlice(c, "args")
	return a
}

// subjects are the group names a ClusterRoleBinding or RoleBinding binds.
func subjects(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	var groups []string
	for _, o := range objs {
		if (o.GetKind() == "ClusterRoleBinding" || o.GetKind() == "RoleBinding") && o.GetName() == name {
			subs, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, s := range subs {
				groups = append(groups, s.(map[string]any)["name"].(string))
			}
			return groups
		}
	}
	t.Fatalf("no binding %s", name)
	return nil
}
