// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

// The shell the demo prints finds the rig's kubectl and the demo's probeshim before any other on
// the host's PATH, with KUBECONFIG set: `kubectl get nodes` and `probeshim status` as typed.
func TestShellPutsKubectlAndProbeshimFirst(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("nsenter needs root")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("no nsenter")
	}
	tmp := t.TempDir()
	kubeBin, demo, host := filepath.Join(tmp, "kube"), filepath.Join(tmp, "demo"), filepath.Join(tmp, "host")
	for _, f := range []string{filepath.Join(kubeBin, "kubectl"), filepath.Join(demo, "probeshim"),
		filepath.Join(host, "kubectl"), filepath.Join(host, "probeshim")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Others on the host's PATH (this machine has a kubectl of its own in /usr/bin).
	t.Setenv("PATH", host+":"+os.Getenv("PATH"))

	// The test's own netns stands in for the rig's.
	line := rig.ShellLine("/proc/self/ns/net", "/example/admin.kubeconfig", kubeBin, demo) + ` -c 'command -v kubectl probeshim; echo "$KUBECONFIG"'`
	out, err := exec.Command("bash", "-c", line).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	want := []string{filepath.Join(kubeBin, "kubectl"), filepath.Join(demo, "probeshim"), "/example/admin.kubeconfig"}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s\nfound %q, want %q", line, got, want)
	}
}

// docs/getting-started.md, "The demo", names every image the demo's registry holds, the demo's probeshim and its log
// where the demo puts them, and a shell with that probeshim on its PATH for `probeshim status`.
func TestDocsDemo(t *testing.T) {
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## The demo\n")
	if !ok {
		t.Fatal(`docs/getting-started.md has no section "## The demo"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section = strings.Join(strings.Fields(section), " ") // lines wrap anywhere

	t.Setenv("PROBESHIM_RIG_NAME", "")
	t.Setenv("PROBESHIM_RIG_DIR", "")
	rigDir := strings.TrimSuffix(rig.StateFile(rig.Config{}), ".state.json")
	want := []string{
		"`" + filepath.Join(demoDir(rigDir), "probeshim") + "`",
		"`" + nodeServiceLog(rigDir) + "`",
		"`probeshim status`",
		demoDir(rigDir) + ":$PATH bash",        // the shell's PATH has the demo's probeshim
		"image: " + rig.Registry + "/me/app:1", // a pod of the user's own
	}
	for _, img := range append(rig.DefaultImages(), images()...) {
		ref, _, err := rig.RegistryRef(img.Ref)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, "`"+ref.String()+"`")
	}
	for _, w := range want {
		if !strings.Contains(section, w) {
			t.Errorf("docs/getting-started.md's \"The demo\" does not name %s", w)
		}
	}
}
