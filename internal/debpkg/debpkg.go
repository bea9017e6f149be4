// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package debpkg is the project's one list of Debian packages (packages.txt, also read by
// hack/ensure-packages.sh) and the installer Go tests and tools use, so that every target installs
// what it needs on a fresh machine instead of relying on what an earlier session left behind.
package debpkg

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/probeshim/probeshim/internal/logtail"
)

//go:embed packages.txt
var list string

// Package is one line of packages.txt.
type Package struct {
	Name   string
	Groups []string
}

// Base reports whether every machine of this kind ships the package (the "base" group).
func (p Package) Base() bool { return slices.Contains(p.Groups, "base") }

// All returns every package of the list, in its order.
func All() []Package {
	var pkgs []Package
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		pkgs = append(pkgs, Package{Name: f[0], Groups: strings.Split(f[1], ",")})
	}
	return pkgs
}

// Group returns the names of the packages in any of groups.
func Group(groups ...string) []string {
	var names []string
	for _, p := range All() {
		for _, g := range groups {
			if slices.Contains(p.Groups, g) {
				names = append(names, p.Name)
				break
			}
		}
	}
	return names
}

// Ensure installs the packages of groups that are missing, with apt-get and without recommends (so
// the list names everything that is used). It waits for the dpkg lock instead of failing when another
// apt runs, and runs `apt-get update` only when something is missing. Without root it fails with the
// command to run.
func Ensure(ctx context.Context, logf func(string, ...any), groups ...string) error {
	want := Group(groups...)
	if len(want) == 0 {
		return fmt.Errorf("debpkg: no packages in groups %v (see internal/debpkg/packages.txt)", groups)
	}
	var missing []string
	for _, p := range want {
		if !Installed(ctx, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing Debian packages %s: run as root, or install them with\n  apt-get install --no-install-recommends %s",
			strings.Join(missing, " "), strings.Join(missing, " "))
	}
	logf("installing Debian packages: %s", strings.Join(missing, " "))
	lock := []string{"-o", "DPkg::Lock::Timeout=300"}
	for _, args := range [][]string{
		append(slices.Clone(lock), "update", "-q"),
		append(append(slices.Clone(lock), "install", "-y", "-q", "--no-install-recommends"), missing...),
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, logtail.Last(out.String(), 30))
		}
	}
	for _, p := range missing {
		if !Installed(ctx, p) {
			return fmt.Errorf("package %s still not installed after apt-get install", p)
		}
	}
	return nil
}

// Installed reports whether dpkg has the package installed.
func Installed(ctx context.Context, name string) bool {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", name).Output()
	return err == nil && strings.HasSuffix(strings.TrimSpace(string(out)), " installed")
}
