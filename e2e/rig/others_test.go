// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"os"
	"testing"
)

// A rig's cleanup takes only what is its own, never that of a rig beside it whose name starts with
// its own (probeshim-rig and probeshim-rig-crr).
func TestOwnNamesOnly(t *testing.T) {
	id := "422233be3200e243038a73841bf32d335abe660373ea498fe302ac8caa77f8a5"
	for rest, want := range map[string]bool{id + "-eth0": true, "crr-" + id + "-eth0": false, "crr-eth0": false} {
		if got := cniCacheEntry.MatchString(rest); got != want {
			t.Errorf("CNI cache entry %q: %v, want %v", rest, got, want)
		}
	}
	for rest, want := range map[string]bool{"123456": true, "crr-123456": false} {
		if got := tempSuffix.MatchString(rest); got != want {
			t.Errorf("build folder suffix %q: %v, want %v", rest, got, want)
		}
	}
	if got := PackageRigName("/tmp/go-build1/b001/restart.test", ""); got != "probeshim-rig-restart" {
		t.Errorf("PackageRigName: %q", got)
	}
	if got := PackageRigName("/tmp/go-build1/b001/node.test", "k1.35-c1.7"); got != "probeshim-rig-node-k135c17" {
		t.Errorf("PackageRigName of row 2: %q", got)
	}
}

// While another rig lives, a teardown removes no folder of the machine's fixed paths, empty or not
// (e2e/packaged's container binds /run/containerd/fifo); the last one removes the empty ones.
func TestFixedFoldersStayWhileOthersLive(t *testing.T) {
	top := t.TempDir()
	fifo := top + "/fifo"
	if err := os.Mkdir(fifo, 0o700); err != nil {
		t.Fatal(err)
	}
	cleanFixedPath(top, "/var/lib/probeshim-rig-x", false, true)
	if _, err := os.Stat(fifo); err != nil {
		t.Fatalf("a teardown beside another rig removed an empty folder: %v", err)
	}
	cleanFixedPath(top, "/var/lib/probeshim-rig-x", true, false)
	if _, err := os.Stat(fifo); !os.IsNotExist(err) {
		t.Fatalf("the last teardown left the empty folder %s: %v", fifo, err)
	}
	if _, err := os.Stat(top); err != nil {
		t.Fatalf("the last teardown removed the top folder it did not create: %v", err)
	}
}
