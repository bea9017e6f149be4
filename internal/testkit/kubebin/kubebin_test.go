// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kubebin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir(t *testing.T) {
	complete, partial := t.TempDir(), t.TempDir()
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if err := os.WriteFile(filepath.Join(complete, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(partial, "etcd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROBESHIM_CACHE", t.TempDir()) // nothing cached
	t.Setenv(UnitOnlyEnv, "")

	t.Setenv("KUBEBUILDER_ASSETS", partial)
	t.Setenv("PROBESHIM_KUBE_BIN", complete)
	if d, err := Dir("kubectl", "etcd"); err != nil || d != complete {
		t.Fatalf("Dir = %q, %v; want the folder that has every binary", d, err)
	}

	t.Setenv("PROBESHIM_KUBE_BIN", "")
	if _, err := Dir(); err == nil || !strings.Contains(err.Error(), "make kube-bins") {
		t.Fatalf("Dir with no complete folder: %v, want an error saying how to build them", err)
	}

	// make unit leaves the API-server suites to make integration, binaries or not.
	t.Setenv("PROBESHIM_KUBE_BIN", complete)
	t.Setenv(UnitOnlyEnv, "1")
	if _, err := Dir(); err == nil || !strings.Contains(err.Error(), "make integration") {
		t.Fatalf("Dir with %s set: %v, want an error naming make integration", UnitOnlyEnv, err)
	}
}

// The one envtest set-up: the project's CRDs found from anywhere, and an API server that starts
// without a routable address.
func TestEnvironment(t *testing.T) {
	env := Environment("/bin-dir", CRDs())
	if _, err := os.Stat(filepath.Join(CRDs(), "apps.kruise.io_nodepodprobes.yaml")); err != nil {
		t.Errorf("CRDs() = %s: %v", CRDs(), err)
	}
	if env.BinaryAssetsDirectory != "/bin-dir" || !env.ErrorIfCRDPathMissing {
		t.Errorf("environment %+v", env)
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	for name, want := range map[string]string{"advertise-address": "127.0.0.1", "endpoint-reconciler-type": "none"} {
		if got := args.Get(name).Get(nil); len(got) != 1 || got[0] != want {
			t.Errorf("--%s = %v, want %s", name, got, want)
		}
	}
}
