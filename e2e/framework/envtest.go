// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

// NewEnvtest returns an envtest environment (etcd and kube-apiserver only,
// on loopback ports of the host) that uses the rig's Kubernetes binaries,
// loading the CRDs in crdDirs. The API server is told not to look for a
// routable address (endpoint-reconciler-type=none, advertise-address
// 127.0.0.1), so it also starts in a netns without a default route.
// Start it with env.Start() and stop it with env.Stop().
func NewEnvtest(crdDirs ...string) *kubebin.Env {
	return kubebin.Environment(EnvtestAssets(), crdDirs...)
}

// EnvtestAssets is the folder for KUBEBUILDER_ASSETS: $KUBEBUILDER_ASSETS if
// set, else the rig's Kubernetes binaries.
func EnvtestAssets() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return rig.DefaultKubeBin()
}

// StartEnvtest starts an envtest API server for the test (skipping it when
// the binaries are missing), stops it when the test ends, and returns its
// config and a client with the given scheme additions.
func StartEnvtest(t testing.TB, crdDirs []string, add ...func(*runtime.Scheme) error) (*rest.Config, client.Client) {
	t.Helper()
	if len(rig.MissingKubeBinaries(EnvtestAssets())) > 0 && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("envtest: Kubernetes binaries not found: run e2e/kubebin/build.sh and export PROBESHIM_KUBE_BIN or KUBEBUILDER_ASSETS")
	}
	env := NewEnvtest(crdDirs...)
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("envtest stop: %v", err)
		}
	})
	s, err := newScheme(add...)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, cl
}
