// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/probeshim/probeshim/internal/testkit/kubebin"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
)

// TestInstallUpgradeUninstall installs the chart on a real API server (envtest: no kubelet, so no
// pod runs) with the Helm SDK, as `helm install --create-namespace` does, then upgrades it with other
// values and uninstalls it. The API server accepts every object; an upgrade changes what the values
// say and keeps what others wrote (the CA bundle the deployment patches into its webhooks, objects of
// the CRDs); uninstalling removes the release's objects but the CRDs and the objects in them.
func TestInstallUpgradeUninstall(t *testing.T) {
	dir, err := kubebin.Dir()
	if err != nil {
		t.Skip("skipped: " + err.Error())
	}
	env := kubebin.Environment(dir)
	rc, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cfg, err := ActionConfig(rc, namespace, t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = "probeshim", namespace, true
	if _, err := inst.RunWithContext(ctx, ch, map[string]any{}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	for _, name := range []string{"podprobemarkers", "nodepodprobes", "containerrecreaterequests"} {
		waitFor(t, ctx, "CRD "+name+" established", func() bool {
			_, err := dyn.Resource(gvr(name)).List(ctx, metav1.ListOptions{})
			return err == nil
		})
	}

	// What others write between releases: the deployment's CA bundle, a user's object of a CRD (its
	// webhook is not served here: the object goes in while the webhook configuration is away, as it
	// would be when the webhooks are served).
	mwc := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	patch := `[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"` + "ZXhhbXBsZQ==" + `"}]`
	if _, err := mwc.Patch(ctx, "probeshim", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	vwcs := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if err := vwcs.Delete(ctx, "probeshim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The markers' defaulting webhook is mutating: let the API server pass over it while it is not served.
	ignoreWebhook(t, ctx, kube, "podprobemarkers.mutate.probeshim.io")
	marker := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
		"metadata": map[string]any{"name": "idle", "namespace": "default"},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "example"}},
			"probes": []any{map[string]any{"name": "idle", "containerName": "main",
				"probe":            map[string]any{"exec": map[string]any{"command": []any{"true"}}},
				"markerPolicy":     []any{map[string]any{"state": "Succeeded", "labels": map[string]any{"example.com/idle": "true"}}},
				"podConditionType": "game.example.com/idle"}},
		},
	}}
	waitFor(t, ctx, "a PodProbeMarker created", func() bool {
		_, err := dyn.Resource(gvr("podprobemarkers")).Namespace("default").Create(ctx, marker, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Logf("creating the marker: %v", err)
			return false
		}
		return true
	})

	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	if _, err := up.RunWithContext(ctx, "probeshim", ch, map[string]any{
		"replicas": 3,
		"decider":  map[string]any{"dryRun": true},
	}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	dep, err := kube.AppsV1().Deployments(namespace).Get(ctx, "probeshim-cluster", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 3 {
		t.Errorf("after the upgrade: Deployment %v, err %v; want 3 replicas", dep.Spec.Replicas, err)
	}
	cm, err := kube.CoreV1().ConfigMaps(namespace).Get(ctx, "probeshim-liveness-decider", metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["config.yaml"], "dryRun: true") {
		t.Errorf("after the upgrade: decider config %q, err %v; want dryRun: true", cm.Data["config.yaml"], err)
	}
	m, err := mwc.Get(ctx, "probeshim", metav1.GetOptions{})
	if err != nil || string(m.Webhooks[0].ClientConfig.CABundle) != "example" {
		t.Errorf("after the upgrade: the patched CA bundle is gone (err %v)", err)
	}
	if _, err := vwcs.Get(ctx, "probeshim", metav1.GetOptions{}); err != nil {
		t.Errorf("after the upgrade: the deleted ValidatingWebhookConfiguration is not back: %v", err)
	}
	if _, err := dyn.Resource(gvr("podprobemarkers")).Namespace("default").Get(ctx, "idle", metav1.GetOptions{}); err != nil {
		t.Errorf("after the upgrade: the PodProbeMarker: %v", err)
	}

	// Once the deployment's Secret holds its CA, an upgrade renders that bundle into every webhook
	// and the conversion webhook, those it adds too: none waits for a replica to patch it in.
	ca := testpki.NewCA(t)
	if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "probeshim-webhook-certs", Namespace: namespace},
		Data:       map[string][]byte{"ca.crt": ca.PEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vwcs.Delete(ctx, "probeshim", metav1.DeleteOptions{}); err != nil { // comes back as an upgrade adds it
		t.Fatal(err)
	}
	if _, err := up.RunWithContext(ctx, "probeshim", ch, map[string]any{"replicas": 3}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	for _, b := range caBundles(t, ctx, kube, dyn) {
		if b.bundle != string(ca.PEM) {
			t.Errorf("after an upgrade with the deployment's Secret in place: %s has caBundle %q, want the Secret's ca.crt", b.holder, b.bundle)
		}
	}

	un := action.NewUninstall(cfg)
	un.DisableHooks = true // no kubelet here runs the uninstall guard's Job (e2e/cluster's TestChart does)
	if _, err := un.Run("probeshim"); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if _, err := kube.AppsV1().Deployments(namespace).Get(ctx, "probeshim-cluster", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after uninstall: the Deployment: %v", err)
	}
	if _, err := mwc.Get(ctx, "probeshim", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after uninstall: the MutatingWebhookConfiguration: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "probeshim-pod-records", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after uninstall: the ValidatingAdmissionPolicy: %v", err)
	}
	if _, err := dyn.Resource(gvr("podprobemarkers")).Namespace("default").Get(ctx, "idle", metav1.GetOptions{}); err != nil {
		t.Errorf("after uninstall: the PodProbeMarker (its CRD is kept): %v", err)
	}
}

type caBundle struct{ holder, bundle string }

// caBundles lists the CA bundle of every webhook of the chart's two configurations and of the
// ContainerRecreateRequest CRD's conversion webhook.
func caBundles(t *testing.T, ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface) []caBundle {
	t.Helper()
	var out []caBundle
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "probeshim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		out = append(out, caBundle{"mutating webhook " + w.Name, string(w.ClientConfig.CABundle)})
	}
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "probeshim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Webhooks {
		out = append(out, caBundle{"validating webhook " + w.Name, string(w.ClientConfig.CABundle)})
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd, err := dyn.Resource(crds).Get(ctx, "containerrecreaterequests.apps.kruise.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b64, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	bundle, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("the CRD's conversion caBundle %q: %v", b64, err)
	}
	return append(out, caBundle{"the ContainerRecreateRequest CRD's conversion webhook", string(bundle)})
}

func gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: resource}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ignoreWebhook sets the failurePolicy of the mutating webhook name (in the configuration "probeshim")
// to Ignore, so that objects go in while no webhook server answers.
func ignoreWebhook(t *testing.T, ctx context.Context, kube kubernetes.Interface, name string) {
	t.Helper()
	mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "probeshim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range mwc.Webhooks {
		if w.Name != name {
			continue
		}
		patch := fmt.Sprintf(`[{"op":"replace","path":"/webhooks/%d/failurePolicy","value":"Ignore"}]`, i)
		if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, "probeshim",
			types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the chart's MutatingWebhookConfiguration has no webhook %s", name)
}
