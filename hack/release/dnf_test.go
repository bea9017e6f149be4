// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// dnfGet reads the dnf repository at dir (the release's repo/rpm, its key one folder up) with dnf
// itself, over HTTP on loopback, through the .repo file the release ships: dnf checks repomd.xml's
// signature with the key the .repo file names (repo_gpgcheck) and each package's checksum, so each
// download is the release's package; a repomd.xml or a package changed after signing is refused.
// dnf download, not install: the packages' dependencies are not there to install on a Debian
// machine (the rpm itself is installed on a real systemd by packaging's TestPackages/rpm).
func dnfGet(t *testing.T, dir string, rpms map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("dnf"); err != nil {
		t.Fatalf("dnf missing (make package-test installs it, internal/build/debpkg's release group): %v", err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(dir))))
	defer srv.Close()
	root := t.TempDir()
	repos := filepath.Join(root, "repos")
	if err := os.MkdirAll(repos, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repos, "probeshim.repo"), dnfRepoFile(srv.URL), 0o644); err != nil {
		t.Fatal(err)
	}
	run := 0
	// download runs dnf download for arch into a folder of its own, with a cache of its own (so
	// every run reads the repository anew), and returns its output and what it wrote.
	download := func(arch string) (string, []string, error) {
		run++
		dl, cache := filepath.Join(root, "dl", strconv.Itoa(run)), filepath.Join(root, "cache", strconv.Itoa(run))
		cmd := exec.Command("dnf", "-y", "--disableplugin=local", "--installroot="+filepath.Join(root, "install", strconv.Itoa(run)),
			"--releasever=40", "--setopt=reposdir="+repos, "--setopt=cachedir="+cache, "--forcearch="+arch,
			"download", "--destdir", dl, "probeshim."+arch)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		got, _ := filepath.Glob(filepath.Join(dl, "*.rpm"))
		return string(out), got, err
	}
	for arch, want := range rpms {
		out, got, err := download(arch)
		if err != nil || len(got) != 1 {
			t.Fatalf("dnf download (%s): %v, wrote %v\n%s", arch, err, got, out)
		}
		a, _ := os.ReadFile(got[0])
		b, _ := os.ReadFile(want)
		if !bytes.Equal(a, b) {
			t.Errorf("dnf download (%s): %s is not the release's %s", arch, got[0], filepath.Base(want))
		}
	}

	arch, pkg := "", ""
	for arch, pkg = range rpms {
		break
	}
	for _, tc := range []struct {
		name, file, want string
		edit             func([]byte) []byte
	}{
		{"repomd.xml changed after signing", filepath.Join(dir, "repodata", "repomd.xml"), "Ignoring repositories: probeshim",
			func(b []byte) []byte { return bytes.Replace(b, []byte("<revision>"), []byte("<revision>9"), 1) }},
		{"a package changed after publishing", filepath.Join(dir, arch, filepath.Base(pkg)), "checksum doesn't match",
			func(b []byte) []byte { b[len(b)-100] ^= 0xff; return b }},
	} {
		orig, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tc.file, tc.edit(bytes.Clone(orig)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, got, err := download(arch)
		if werr := os.WriteFile(tc.file, orig, 0o644); werr != nil {
			t.Fatal(werr)
		}
		if err == nil || len(got) != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("dnf download with %s: err %v, wrote %v, want a refusal (%q):\n%s", tc.name, err, got, tc.want, out)
		}
	}
}
