// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probeshim/probeshim/internal/build/docrun"
)

// Every relative link of README.md and docs/ leads to a file, and to a heading of it.
func TestDocsLinks(t *testing.T) {
	broken, err := check("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

// A missing file, a missing anchor and an anchor GitHub and MkDocs spell differently are broken;
// links in code, to other sites and to existing headings are not.
func TestBrokenLinksFound(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "[a](docs/a.md#whats-here) [b](docs/gone.md) [c](https://example.com/x#y) `[d](nope.md)`\n")
	write("docs/a.md", "# A\n\n## What's here\n\n## Two  spaces\n\n```\n[e](gone.md)\n```\n[f](#nothing) [g](#two--spaces) [h](#whats-here)\n")
	broken, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(broken, "\n")
	for _, want := range []string{"README.md:1: docs/gone.md: no such file", "docs/a.md:10: #nothing: no heading", "docs/a.md:10: #two--spaces: no heading"} {
		if !strings.Contains(got, want) {
			t.Errorf("broken links:\n%s\nwant one %q", got, want)
		}
	}
	if len(broken) != 3 {
		t.Errorf("%d broken links, want 3:\n%s", len(broken), got)
	}
}

// Every run marker of docs/ marks a shell block (e2e/examples runs them on the rig), and some do.
func TestMarkedCommands(t *testing.T) {
	blocks, err := docrun.Blocks("../../docs")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatalf("no shell block of docs/ is marked %s", docrun.Marker)
	}
}
