// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/probeshim/probeshim/cluster/kruise"
	"github.com/probeshim/probeshim/cluster/webhook"
	"github.com/probeshim/probeshim/internal/heartbeatapi"
)

// What docs/install/gitops.md promises a GitOps tool (Argo CD, Flux): the cluster part's run-time
// writes are never drift. The chart renders no caBundle (the deployment or cert-manager's cainjector
// sets it: a field the chart never wrote), and none of the objects the deployment creates at run
// time is rendered by the chart, so none is the chart's to prune or revert; in every value set.
func TestNoRunTimeFieldsRendered(t *testing.T) {
	runTime := map[string]bool{ // kind/name of what the deployment creates itself
		"Secret/probeshim-webhook-certs":          true, // self-managed certificates (--webhook-secret-name's default)
		"ConfigMap/" + webhook.PolicyParamsName:   true,
		"ConfigMap/" + kruise.StatusConfigMap:     true,
		"ConfigMap/" + kruise.HandoverConfigMap:   true,
		"ClusterRoleBinding/" + kruise.KeeperRole: true,
		"ConfigMap/" + heartbeatapi.ConfigMapName: true,
	}
	for name, vals := range valueSets() {
		for _, o := range render(t, vals) {
			if runTime[o.GetKind()+"/"+o.GetName()] {
				t.Errorf("%s: the chart renders %s/%s, which the deployment writes at run time", name, o.GetKind(), o.GetName())
			}
			if o.GetKind() == "CustomResourceDefinition" {
				if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle"); ok {
					t.Errorf("%s: CRD %s renders its conversion webhook's caBundle: a sync would revert the one injected at run time", name, o.GetName())
				}
				continue
			}
			if o.GetKind() != "MutatingWebhookConfiguration" && o.GetKind() != "ValidatingWebhookConfiguration" {
				continue
			}
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for _, h := range hooks {
				cc, _ := h.(map[string]any)["clientConfig"].(map[string]any)
				if _, ok := cc["caBundle"]; ok {
					t.Errorf("%s: %s %s renders a caBundle: a sync would revert the one injected at run time", name, o.GetKind(), o.GetName())
				}
			}
		}
	}
	// The objects the deployment creates carry no app.kubernetes.io/instance label: Argo CD's
	// default tracking would count them as the application's and offer to prune them.
	err := filepath.WalkDir("../cluster", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), `"app.kubernetes.io/instance"`) {
			t.Errorf("%s labels an object app.kubernetes.io/instance", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
