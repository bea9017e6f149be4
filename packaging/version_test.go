// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionScript runs packaging/version.sh in a scratch git repository through the life of a
// project (no commit, no tag, dirty, release candidate, release, commits after it) and checks each
// version is valid and newer than the one before, for dpkg and, when installed, rpm.
func TestVersionScript(t *testing.T) {
	for _, tool := range []string{"git", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	dir := t.TempDir()
	script, err := os.ReadFile("version.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "packaging"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "packaging/version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
			"GIT_AUTHOR_DATE=2026-11-29T10:00:00Z", "GIT_COMMITTER_DATE=2026-11-29T10:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	commitDate := func(d string) {
		t.Helper()
		cmd := exec.Command("git", "commit", "-q", "--allow-empty", "-m", "c")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
			"GIT_AUTHOR_DATE="+d, "GIT_COMMITTER_DATE="+d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git commit: %v\n%s", err, out)
		}
	}
	version := func() string {
		t.Helper()
		cmd := exec.Command("packaging/version.sh")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PROBESHIM_VERSION=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("version.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}

	git("init", "-q")
	var seen []string
	expect := func(pattern string) {
		t.Helper()
		v := version()
		if !regexp.MustCompile("^" + pattern + "$").MatchString(v) {
			t.Fatalf("version %q, want %s", v, pattern)
		}
		seen = append(seen, v)
	}
	expect(`0\.0\.0~git00000000000000\.uncommitted`)
	git("add", "packaging/version.sh")
	commitDate("2026-11-29T10:00:00Z")
	expect(`0\.0\.0~git20261129100000\.[0-9a-f]{7}`)
	if err := os.WriteFile(filepath.Join(dir, "packaging/version.sh"), append(script, '\n'), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(`0\.0\.0~git20261129100000\.[0-9a-f]{7}\.dirty`)
	git("checkout", "-q", "packaging/version.sh")
	commitDate("2026-11-30T08:00:00Z")
	expect(`0\.0\.0~git20261130080000\.[0-9a-f]{7}`)
	git("tag", "v0.1.0-rc.1")
	expect(`0\.1\.0~rc\.1`)
	commitDate("2026-12-01T08:00:00Z")
	expect(`0\.1\.0~rc\.1\+git20261201080000\.1\.[0-9a-f]{7}`)
	git("tag", "v0.1.0")
	expect(`0\.1\.0`)
	commitDate("2026-12-02T08:00:00Z")
	commitDate("2026-12-03T08:00:00Z")
	expect(`0\.1\.0\+git20261203080000\.2\.[0-9a-f]{7}`)

	_, haveRPM := exec.LookPath("rpm")
	for i := 1; i < len(seen); i++ {
		a, b := seen[i-1], seen[i]
		if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg: %s is not older than %s", a, b)
		}
		if haveRPM == nil {
			out, err := exec.Command("rpm", "-E", "%{lua: print(rpm.vercmp('"+a+"', '"+b+"'))}").Output()
			if err != nil || strings.TrimSpace(string(out)) != "-1" {
				t.Errorf("rpm: %s is not older than %s (%s, %v)", a, b, out, err)
			}
		}
	}
	t.Logf("versions: %s", strings.Join(seen, " < "))
}
