// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package packaging

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildArches builds the packages as `make packages` does (every architecture, no root) and
// checks each one: the .deb and the .rpm of amd64 and arm64, each declaring its architecture, each
// holding a static probeshim for that machine, the rpm's the same binary as the deb's.
func TestBuildArches(t *testing.T) {
	for _, tool := range []string{"git", "dpkg-deb", "rpm", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	dist := t.TempDir()
	cmd := exec.Command("./build.sh")
	cmd.Env = append(os.Environ(), "PROBESHIM_VERSION=1.0.0~archtest.1", "PROBESHIM_DIST="+dist,
		"PROBESHIM_ARCHES=", "PROBESHIM_FORMATS=", "PROBESHIM_BINARY=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, stderr.String())
	}
	printed := strings.Fields(string(out))

	for _, a := range []struct {
		goarch, rpmArch string
		machine         elf.Machine
	}{
		{"amd64", "x86_64", elf.EM_X86_64},
		{"arm64", "aarch64", elf.EM_AARCH64},
	} {
		deb := filepath.Join(dist, "probeshim_1.0.0~archtest.1-1_"+a.goarch+".deb")
		rpm := filepath.Join(dist, "probeshim-1.0.0~archtest.1-1."+a.rpmArch+".rpm")
		for _, p := range []string{deb, rpm} {
			if !strings.Contains(string(out), p) {
				t.Errorf("build.sh did not print %s; it printed %q", p, printed)
			}
		}
		if got := output(t, "dpkg-deb", "--field", deb, "Architecture"); got != a.goarch {
			t.Errorf("%s: Architecture %q, want %q", deb, got, a.goarch)
		}
		if got := output(t, "rpm", "-qp", "--qf", "%{ARCH}", rpm); got != a.rpmArch {
			t.Errorf("%s: ARCH %q, want %q", rpm, got, a.rpmArch)
		}

		bin := filepath.Join(t.TempDir(), "probeshim")
		data, err := exec.Command("sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -xO ./usr/bin/probeshim`, "sh", deb).Output()
		if err != nil {
			t.Fatalf("%s: reading /usr/bin/probeshim: %v", deb, err)
		}
		if err := os.WriteFile(bin, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: /usr/bin/probeshim: %v", deb, err)
		}
		if f.Machine != a.machine {
			t.Errorf("%s: /usr/bin/probeshim is for %s, want %s", deb, f.Machine, a.machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: /usr/bin/probeshim is dynamically linked (it has an interpreter)", deb)
			}
		}
		f.Close()

		sum := sha256.Sum256(data)
		digests := output(t, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEDIGESTS}\n]", rpm)
		if want := "/usr/bin/probeshim " + hex.EncodeToString(sum[:]); !strings.Contains(digests, want) {
			t.Errorf("%s: /usr/bin/probeshim differs from the .deb's (want %q in\n%s)", rpm, want, digests)
		}
	}
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr)
	}
	return strings.TrimSpace(string(out))
}
