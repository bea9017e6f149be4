// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package kubebin finds the Kubernetes binaries that e2e/kubebin/build.sh
// builds, for the tests that run a real kube-apiserver (envtest).
package kubebin

import (
	"fmt"
	"os"
	"path/filepath"
)

// UnitOnlyEnv, when set, keeps Dir from finding any binaries.
const UnitOnlyEnv = "PROBESHIM_UNIT_ONLY"

// Dir returns the first folder that holds every one of bins (kube-apiserver
// and etcd when none are named): $KUBEBUILDER_ASSETS, $PROBESHIM_KUBE_BIN
// (what `make` exports), then the newest build under $PROBESHIM_CACHE/kube
// (default /var/cache/probeshim). The error says how to build them.
//
// With PROBESHIM_UNIT_ONLY set (make unit) it always fails, so the suites that need an API server
// skip there and run in make integration.
func Dir(bins ...string) (string, error) {
	if os.Getenv(UnitOnlyEnv) != "" {
		return "", fmt.Errorf("%s is set: the tests against a real API server run in make integration", UnitOnlyEnv)
	}
	if len(bins) == 0 {
		bins = []string{"kube-apiserver", "etcd"}
	}
	var candidates []string
	for _, env := range []string{"KUBEBUILDER_ASSETS", "PROBESHIM_KUBE_BIN"} {
		if d := os.Getenv(env); d != "" {
			candidates = append(candidates, d)
		}
	}
	cache := os.Getenv("PROBESHIM_CACHE")
	if cache == "" {
		cache = "/var/cache/probeshim"
	}
	found, _ := filepath.Glob(filepath.Join(cache, "kube", "v*"))
	for i := len(found) - 1; i >= 0; i-- { // newest version first
		candidates = append(candidates, found[i])
	}
	for _, d := range candidates {
		if hasAll(d, bins) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no %v in KUBEBUILDER_ASSETS, PROBESHIM_KUBE_BIN or %s/kube/*: build them with `make kube-bins`",
		bins, cache)
}

func hasAll(dir string, bins []string) bool {
	for _, b := range bins {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}
