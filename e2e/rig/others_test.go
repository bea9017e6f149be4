// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import "testing"

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
	if got := PackageRigName("/tmp/go-build1/b001/restart.test"); got != "probeshim-rig-restart" {
		t.Errorf("PackageRigName: %q", got)
	}
}
