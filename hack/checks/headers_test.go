// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package checks

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Header is the first line of every Go file (controller-gen's output starts with its build tag, so
// the header may come within the first three lines).
const Header = "// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0."

func TestLicenseHeaders(t *testing.T) {
	for _, f := range repoFiles(t, "*.go", 100) {
		if !hasHeader(t, "../../"+f) {
			t.Errorf("%s: the first lines lack the license header %q", f, Header)
		}
	}
}

func hasHeader(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return true // deleted in the work tree
		}
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; i < 3 && sc.Scan(); i++ {
		if sc.Text() == Header {
			return true
		}
	}
	return false
}

// repoFiles lists the repository's files matching pattern that git tracks or would (untracked, not
// ignored), relative to its top; fewer than atLeast means this is not the repository.
func repoFiles(t *testing.T, pattern string, atLeast int) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", "../..", "ls-files", "--cached", "--others", "--exclude-standard", pattern).Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < atLeast {
		t.Fatalf("git ls-files found only %d files %s: not the repository?", len(files), pattern)
	}
	return files
}
