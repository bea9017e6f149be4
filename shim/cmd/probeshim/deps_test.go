// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoFullClientset keeps client-go's whole clientset out of the node service: it uses two
// API groups, and a kubernetes.Clientset keeps the client code of all ~56 in the binary (about
// 9 MB of text), whose touched pages count in the service's RSS (issue 20). shim/kube builds
// clients of just those groups.
func TestNoFullClientset(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH to list the binary's packages")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "k8s.io/client-go/kubernetes" {
			t.Errorf("probeshim links %s; build clients of the groups it uses (shim/kube)", pkg)
		}
	}
}
