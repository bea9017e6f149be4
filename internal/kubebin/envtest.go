// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kubebin

import (
	"path/filepath"
	"runtime"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Environment is the one envtest set-up of the project's tests: etcd and kube-apiserver from
// dir (see Dir) on loopback ports, with the CRDs of crdDirs installed (see CRDs). The API server
// is told not to look for a routable address (advertise-address 127.0.0.1,
// endpoint-reconciler-type none), so it also starts in a network namespace without a default
// route, such as the rig's. Start it with Start and stop it with Stop.
func Environment(dir string, crdDirs ...string) *envtest.Environment {
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: len(crdDirs) > 0,
	}
	env.ControlPlane.GetAPIServer().Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	return env
}

// CRDs is the folder of the project's CRD manifests (apis/crds), wherever the test runs from.
func CRDs() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..", "apis", "crds")
}
