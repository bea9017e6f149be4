// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package debpkg

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

var knownGroups = []string{"base", "unit", "lint", "nspawn", "rig", "runc-build", "release", "docs", "profile"}

// table is every package of the list with its groups, in the list's order, as the script reads it.
func table(t *testing.T) (names []string, groups map[string][]string) {
	t.Helper()
	out, err := run(context.Background(), io.Discard, "--table")
	if err != nil {
		t.Fatal(err)
	}
	groups = map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, gs, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("--table line %q: want NAME GROUPS", line)
		}
		names = append(names, name)
		groups[name] = append(groups[name], strings.Split(gs, ",")...)
	}
	return names, groups
}

func list(t *testing.T, groups ...string) []string {
	t.Helper()
	names, err := List(context.Background(), groups...)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestList(t *testing.T) {
	names, groups := table(t)
	if len(names) < 10 {
		t.Fatalf("--table lists %d packages: %v", len(names), names)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			t.Errorf("%s is listed twice", name)
		}
		seen[name] = true
		for _, g := range groups[name] {
			if !slices.Contains(knownGroups, g) {
				t.Errorf("%s: unknown group %q (known: %v)", name, g, knownGroups)
			}
		}
		if slices.Equal(groups[name], []string{"base"}) {
			t.Errorf("%s: only in base, so no target uses it", name)
		}
	}
	// --list resolves groups as the table says, in the list's order.
	for _, g := range knownGroups {
		var want []string
		for _, name := range names {
			if slices.Contains(groups[name], g) {
				want = append(want, name)
			}
		}
		if got := list(t, g); len(got) == 0 || !slices.Equal(got, want) {
			t.Errorf("group %s: --list gives %v, the table %v", g, got, want)
		}
	}
	// The regression of issue 13: rpmlint needs the rpm tool, which is only its Recommends.
	if !slices.Contains(list(t, "lint"), "rpm") {
		t.Error("lint must install rpm")
	}
	// Issue 17: the rig runs containerd and runc built from pinned sources (e2e/containerdbin), so
	// Debian's (containerd 1.6, runc 1.1) must not come back into the rig.
	rig := list(t, "rig")
	for _, p := range []string{"containerd", "runc", "containerd.io"} {
		if slices.Contains(rig, p) {
			t.Errorf("group rig installs Debian's %s; the rig builds its runtime (e2e/containerdbin/build.sh)", p)
		}
	}
	if !slices.Contains(list(t, "runc-build"), "libseccomp-dev") {
		t.Error("runc-build must install libseccomp-dev: runc's seccomp goes through cgo")
	}
}

// Ensure passes on the script's messages as they come and fails with its failure and message (a
// group that is not in the list fails before anything is installed).
func TestEnsureReportsTheScriptsError(t *testing.T) {
	var logged []string
	logf := func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }
	err := Ensure(context.Background(), logf, "no-such-group")
	const msg = "no packages in groups: no-such-group"
	if err == nil || !strings.Contains(err.Error(), msg) {
		t.Errorf("Ensure(no-such-group) = %v, want the script's error", err)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], msg) {
		t.Errorf("logged %q, want the script's message", logged)
	}
}
