// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package debpkg

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var knownGroups = []string{"base", "unit", "lint", "nspawn", "rig", "runc-build", "release", "docs"}

func TestList(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		if seen[p.Name] {
			t.Errorf("%s is listed twice", p.Name)
		}
		seen[p.Name] = true
		for _, g := range p.Groups {
			if !slices.Contains(knownGroups, g) {
				t.Errorf("%s: unknown group %q (known: %v)", p.Name, g, knownGroups)
			}
		}
		if p.Base() && len(p.Groups) == 1 {
			t.Errorf("%s: only in base, so no target uses it", p.Name)
		}
	}
	for _, g := range knownGroups {
		if len(Group(g)) == 0 {
			t.Errorf("group %s is empty", g)
		}
	}
	// The regression of issue 13: rpmlint needs the rpm tool, which is only its Recommends.
	if !slices.Contains(Group("lint"), "rpm") {
		t.Error("lint must install rpm")
	}
	// Issue 17: the rig runs containerd and runc built from pinned sources (e2e/containerdbin), so
	// Debian's (containerd 1.6, runc 1.1) must not come back into the rig.
	for _, p := range []string{"containerd", "runc", "containerd.io"} {
		if slices.Contains(Group("rig"), p) {
			t.Errorf("group rig installs Debian's %s; the rig builds its runtime (e2e/containerdbin/build.sh)", p)
		}
	}
	if !slices.Contains(Group("runc-build"), "libseccomp-dev") {
		t.Error("runc-build must install libseccomp-dev: runc's seccomp goes through cgo")
	}
}

// TestShellReadsTheSameList checks hack/ensure-packages.sh resolves groups exactly as Group does.
func TestShellReadsTheSameList(t *testing.T) {
	for _, g := range knownGroups {
		out, err := exec.Command("../../hack/ensure-packages.sh", "--list", g).Output()
		if err != nil {
			t.Fatalf("ensure-packages.sh --list %s: %v", g, err)
		}
		if got, want := strings.Fields(string(out)), Group(g); !slices.Equal(got, want) {
			t.Errorf("group %s: shell lists %v, Go %v", g, got, want)
		}
	}
}
