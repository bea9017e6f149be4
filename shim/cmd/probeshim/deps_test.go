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
	for _, pkg := range deps(t) {
		if pkg == "k8s.io/client-go/kubernetes" {
			t.Errorf("probeshim links %s; build clients of the groups it uses (shim/kube)", pkg)
		}
	}
}

// TestNoClientGoScheme keeps client-go's scheme of every API group out too: its typed clients
// (k8s.io/client-go/kubernetes/typed/...) and its event recorder (tools/record) import it, and
// registering ~56 groups at start touches their code and type data: the binary was 68 MB with
// it, 43 MB without, and the service's RSS (a real API server and containerd, a 300-probe
// NodePodProbe) 45 MB with it, 35 MB without (issue 20). shim/kube's REST clients use a scheme
// of the three groups the service reads and writes; shim/events writes its events.
func TestNoClientGoScheme(t *testing.T) {
	for _, pkg := range deps(t) {
		if pkg == "k8s.io/client-go/kubernetes/scheme" || pkg == "k8s.io/client-go/tools/record" ||
			strings.HasPrefix(pkg, "k8s.io/client-go/kubernetes/typed/") {
			t.Errorf("probeshim links %s; use shim/kube's clients and shim/events", pkg)
		}
		// Only the groups of shim/kube.Scheme: another one means a new client or scheme crept in.
		if rest, ok := strings.CutPrefix(pkg, "k8s.io/api/"); ok && rest != "core/v1" && rest != "coordination/v1" {
			t.Errorf("probeshim links the API group package %s; shim/kube knows core/v1 and coordination/v1", pkg)
		}
	}
}

// deps lists the packages the binary links.
func deps(t *testing.T) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH to list the binary's packages")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	return strings.Fields(string(out))
}
