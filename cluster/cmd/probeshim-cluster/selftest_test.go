// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/apis/v1alpha1/validation"
	"github.com/probeshim/probeshim/charts"
)

// The dry run's marker is invalid for its annotation alone: a refusal that names it is the
// validating webhook's, not a schema's or another check's.
func TestSelftestMarker(t *testing.T) {
	errs := validation.ValidatePodProbeMarker(selftestMarker("probeshim-system"))
	if len(errs) != 1 || !strings.Contains(errs[0].Field, v1alpha1.AnnotationOnNodeServiceSilent) {
		t.Errorf("validation of the selftest marker: %v; want one error, on its annotation", errs)
	}
}

// selftest fails, saying why, where the webhooks are not installed and where a CRD is not served.
func TestSelftestFailures(t *testing.T) {
	cfg, _ := startAPIServer(t)
	run := func() (int, string) {
		var out, errOut bytes.Buffer
		code := runSelftest(context.Background(), []string{"--namespace=default", "--timeout=3s"}, &out, &errOut,
			func() (*rest.Config, error) { return cfg, nil })
		return code, out.String() + errOut.String()
	}
	code, out := run()
	if code != 1 || !strings.Contains(out, "ok: CRDs: the API server serves podprobemarkers, nodepodprobes, containerrecreaterequests") ||
		!strings.Contains(out, "FAILED: webhooks: a PodProbeMarker with an invalid probeshim.io/on-node-service-silent annotation was admitted") {
		t.Errorf("without webhooks: exit %d, %q", code, out)
	}

	scheme := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "podprobemarkers.apps.kruise.io"
	if err := c.Delete(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out = run()
		if strings.Contains(out, "FAILED: CRDs:") || time.Now().After(deadline) {
			break
		}
	}
	if code != 1 || !strings.Contains(out, "FAILED: CRDs: the API server does not serve podprobemarkers of apps.kruise.io/v1alpha1") {
		t.Errorf("without the CRD of podprobemarkers: exit %d, %q", code, out)
	}
}

// checkSelftest runs selftest against the deployment TestRun runs, as the chart's test account
// with the RBAC the chart gives it: the CRDs are served and the webhook refuses.
func checkSelftest(t *testing.T, ctx context.Context, c client.Client, cfg *rest.Config) {
	t.Helper()
	rel, err := charts.Render(filepath.Join("..", "..", "..", "charts", "probeshim"), namespace, "v1.37.2", nil)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	for _, h := range rel.Hooks {
		if h.Name != "probeshim-selftest" || h.Kind == "Pod" {
			continue
		}
		for _, o := range decodeManifest(t, scheme, []byte(h.Manifest), "") {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("the chart's %s %s: %v", h.Kind, h.Name, err)
			}
		}
	}
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":probeshim-selftest",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	var out, errOut bytes.Buffer
	code := runSelftest(ctx, []string{"--namespace=" + namespace, "--timeout=20s"}, &out, &errOut,
		func() (*rest.Config, error) { return sa, nil })
	if code != 0 || !strings.Contains(out.String(), `ok: webhooks: the webhook refused an invalid PodProbeMarker (dry run): admission webhook "podprobemarkers.probeshim.io" denied the request`) {
		t.Errorf("selftest: exit %d, %s%s", code, out.String(), errOut.String())
	}
}
