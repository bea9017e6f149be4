// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nspawn

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/probeshim/probeshim/internal/build/debpkg"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

// Suite and Packages define the base system: Debian's minimal variant plus systemd as init, D-Bus
// (systemctl and logind need it), rpm (to test .rpm packages with Debian's rpm) and procps (the
// deb depends on it for /bin/kill, as a node has it; the rpm's ExecReload= uses it too).
const Suite = "bookworm"

var Packages = []string{"systemd", "systemd-sysv", "dbus", "rpm", "procps"}

// rootfsRevision changes whenever the recipe below changes, so an old cached tarball is not reused.
const rootfsRevision = 2

// Rootfs returns the cached base tarball in cacheDir, building it first when it is missing
// (about a minute and 270 MB). Concurrent callers wait for one build.
func Rootfs(ctx context.Context, cacheDir string, logf func(string, ...any)) (string, error) {
	name := fmt.Sprintf("rootfs-%s-%s-r%d.tar", Suite, strings.Join(Packages, "_"), rootfsRevision)
	tarball := filepath.Join(cacheDir, name)
	if _, err := os.Stat(tarball); err == nil {
		return tarball, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(tarball+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // the lock goes with lock.Close anyway
	if _, err := os.Stat(tarball); err == nil {
		return tarball, nil // built by another caller while we waited
	}
	if err := EnsureHostPackages(ctx, logf); err != nil {
		return "", err
	}
	logf("building the %s rootfs with mmdebstrap into %s (once; about a minute)", Suite, tarball)
	start := time.Now()
	tmp := tarball + ".tmp"
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar",
		"--include="+strings.Join(Packages, ","),
		// mmdebstrap copies this machine's host name; without the file a container's host name is
		// its machine name, as a node's is its own.
		`--customize-hook=rm -f "$1/etc/hostname"`,
		Suite, tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("mmdebstrap: %w\n%s", err, logtail.Last(out.String(), 30))
	}
	if err := os.Rename(tmp, tarball); err != nil {
		return "", err
	}
	logf("rootfs built in %s", time.Since(start).Round(time.Second))
	// Tarballs of older recipes are dead weight (270 MB each).
	old, _ := filepath.Glob(filepath.Join(cacheDir, "rootfs-*.tar"))
	for _, p := range old {
		if p != tarball {
			_ = os.Remove(p)
			_ = os.Remove(p + ".lock")
		}
	}
	return tarball, nil
}

// Extract unpacks a rootfs tarball into dir (created; about 2 s).
func Extract(ctx context.Context, tarball, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "tar", "-xf", tarball, "-C", dir,
		"--numeric-owner", "--xattrs", "--xattrs-include=*").CombinedOutput()
	if err != nil {
		return fmt.Errorf("extract %s: %w\n%s", tarball, err, out)
	}
	return nil
}

// EnsureHostPackages installs the Debian packages this package needs on the host (the group
// "nspawn" of internal/build/debpkg/packages.txt) when they are missing.
func EnsureHostPackages(ctx context.Context, logf func(string, ...any)) error {
	return debpkg.Ensure(ctx, logf, "nspawn")
}
