// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package rigtest puts the packaged probeshim service on the e2e rig's node: a systemd container
// (packaging/nspawn) booted inside the rig's network namespace with the rig's folder bound in at
// the same path — containerd's socket, the pods' network namespace files, the node's kubeconfig and
// its certificates — where the .deb is installed and its config pointed at the rig.
//
// Both the package tests (TestPackages/rig, driven by the PROBESHIM_RIG_* variables) and the rig
// suite e2e/packaged use it.
package rigtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/probeshim/probeshim/packaging/nspawn"
)

// Unit is the packaged service's unit.
const Unit = "probeshim.service"

// Rig is what the container needs to know about a running rig.
type Rig struct {
	Dir        string // the rig's folder, bound read-only at the same path
	NetNS      string // the rig's network namespace (/run/netns/NAME)
	Containerd string // containerd's socket (inside Dir)
	Kubeconfig string // a kubeconfig for the node (system:node:<name>), it and its certificates inside Dir
	Node       string // the node's name
}

// Environment variables FromEnv reads, in the order of Rig's fields.
var EnvVars = []string{"PROBESHIM_RIG_DIR", "PROBESHIM_RIG_NETNS", "PROBESHIM_RIG_CONTAINERD",
	"PROBESHIM_RIG_KUBECONFIG", "PROBESHIM_RIG_NODE"}

// FromEnv reads a Rig from EnvVars; ok is false when any of them is unset.
func FromEnv() (r Rig, ok bool) {
	v := make([]string, len(EnvVars))
	for i, k := range EnvVars {
		if v[i] = os.Getenv(k); v[i] == "" {
			return Rig{}, false
		}
	}
	return Rig{Dir: v[0], NetNS: v[1], Containerd: v[2], Kubeconfig: v[3], Node: v[4]}, true
}

// Options returns the container options that put it on the rig's node; the caller adds Root, Name
// and whatever else it binds. Every path the service uses must be inside the rig's folder.
func (r Rig) Options() (nspawn.Options, error) {
	for _, p := range []string{r.Containerd, r.Kubeconfig} {
		if rel, err := filepath.Rel(r.Dir, p); err != nil || strings.HasPrefix(rel, "..") {
			return nspawn.Options{}, fmt.Errorf("rigtest: %s is outside the rig's folder %s, so not visible in the container", p, r.Dir)
		}
	}
	// containerd's client makes exec output FIFOs under /run/containerd/fifo and the rig's
	// containerd opens them by that path on the host: the container must share that folder.
	if err := os.MkdirAll("/run/containerd/fifo", 0o700); err != nil {
		return nspawn.Options{}, err
	}
	return nspawn.Options{
		NetNS:  r.NetNS,
		Bind:   []string{"/run/containerd/fifo"},
		BindRO: []string{r.Dir},
	}, nil
}

// Install installs the .deb (debPath is its path inside the container) with dpkg -i, then
// Configure.
func Install(ctx context.Context, c *nspawn.Container, debPath string, r Rig) error {
	if out, err := c.Sh(ctx, "dpkg -i "+shellQuote(debPath)+" >/dev/null"); err != nil {
		return fmt.Errorf("rigtest: dpkg -i: %w\n%s", err, out)
	}
	return Configure(ctx, c, r)
}

// Configure points the installed package's config at the rig (node name, kubeconfig, containerd
// socket), restarts the service and checks it is active.
func Configure(ctx context.Context, c *nspawn.Container, r Rig) error {
	script := fmt.Sprintf(`set -e
printf 'nodeName: %%s\nkubeconfig: %%s\ncontainerdSocket: %%s\n' %s %s %s >>/etc/probeshim/config.yaml
systemctl restart %s
systemctl is-active %s`, shellQuote(r.Node), shellQuote(r.Kubeconfig), shellQuote(r.Containerd), Unit, Unit)
	if out, err := c.Sh(ctx, script); err != nil {
		st, _ := c.Sh(ctx, "systemctl status --no-pager -l "+Unit+"; journalctl --no-pager -n 40 -u "+Unit)
		return fmt.Errorf("rigtest: configuring the package: %w\n%s\n%s", err, out, st)
	}
	return nil
}

// Packages are built packages.
type Packages struct{ Deb, RPM string }

// Build runs packaging/build.sh in repo with env added (PROBESHIM_VERSION, PROBESHIM_DIST, ...) and
// returns the packages it wrote. It builds for this machine's architecture only (the packages the
// tests install here) unless env sets PROBESHIM_ARCHES.
func Build(ctx context.Context, repo string, env ...string) (Packages, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "packaging/build.sh"))
	cmd.Dir = repo
	// Later entries win: env overrides the default architecture.
	cmd.Env = append(append(os.Environ(), "PROBESHIM_ARCHES="+runtime.GOARCH), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Packages{}, fmt.Errorf("packaging/build.sh: %w\n%s%s", err, out, stderr.String())
	}
	var p Packages
	for _, f := range strings.Fields(string(out)) {
		if !filepath.IsAbs(f) {
			f = filepath.Join(repo, f)
		}
		switch {
		case strings.HasSuffix(f, ".deb"):
			p.Deb = f
		case strings.HasSuffix(f, ".rpm"):
			p.RPM = f
		}
	}
	if p.Deb == "" && p.RPM == "" {
		return p, fmt.Errorf("packaging/build.sh printed no packages: %q", out)
	}
	return p, nil
}

// Base makes the base system the containers boot from: the host packages nspawn needs, the
// Debian rootfs tarball (cached in cacheDir, built if missing), extracted into root.
func Base(ctx context.Context, logf func(string, ...any), cacheDir, root string) error {
	if err := nspawn.EnsureHostPackages(ctx, logf); err != nil {
		return err
	}
	tarball, err := nspawn.Rootfs(ctx, cacheDir, logf)
	if err != nil {
		return err
	}
	return nspawn.Extract(ctx, tarball, root)
}

// CacheDir is where the base system's tarball is cached: $PROBESHIM_CACHE/packaging (default
// /var/cache/probeshim/packaging).
func CacheDir() string {
	dir := os.Getenv("PROBESHIM_CACHE")
	if dir == "" {
		dir = "/var/cache/probeshim"
	}
	return filepath.Join(dir, "packaging")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
