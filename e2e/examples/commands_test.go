// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package examples

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/internal/build/docrun"
)

// testDocCommands runs every marked shell block of the docs, in order, as a user would in the
// demo's shell: bash -e in the rig's network namespace, from the repository's root, with the rig's
// kubectl and the kubectl plugin (built here) first on PATH. A block that fails fails the test with
// its output; the rest still run.
func (s *suite) testDocCommands(t *testing.T) {
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docrun.Blocks(filepath.Join(root, "docs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatalf("no shell block of docs/ is marked %s", docrun.Marker)
	}
	bin := t.TempDir()
	build := exec.CommandContext(framework.Context(t, 5*time.Minute), "go", "build", "-o", filepath.Join(bin, "kubectl-probeshim"), "./cluster/cmd/kubectl-probeshim")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the kubectl plugin: %v\n%s", err, out)
	}
	path := s.c.Rig.KubeBin() + ":" + bin + ":" + os.Getenv("PATH")
	for _, b := range blocks {
		rel, _ := filepath.Rel(root, b.Page)
		name := fmt.Sprintf("%s:%d", rel, b.Line)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		cmd := s.c.Rig.Command(ctx, "env", "KUBECONFIG="+s.c.Rig.AdminKubeconfig(), "PATH="+path,
			"bash", "-e", "-o", "pipefail", "-c", b.Text)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("%s: %v after %s\n%s\n--- output:\n%s", name, err, time.Since(start).Round(time.Millisecond), b.Text, out.String())
			continue
		}
		t.Logf("%s: ran in %s; output:\n%s", name, time.Since(start).Round(time.Millisecond), out.String())
	}
}
