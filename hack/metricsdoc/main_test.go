// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/metrics.md is what the code registers: a metric added, removed or renamed, or one whose type,
// labels or help changed, without the file regenerated fails here (and in make verify-generated).
func TestDocCurrent(t *testing.T) {
	if err := checkDoc("../../docs/metrics.md"); err != nil {
		t.Fatal(err)
	}
}

// A stale file's error says what to do and which lines differ.
func TestCheckStale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.md")
	if err := os.WriteFile(path, []byte("# Metrics reference\n| `probeshim_gone_total` | counter | (none) | Gone. |\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := checkDoc(path)
	for _, want := range []string{"is stale: run 'make generate'", "\n- | `probeshim_gone_total` |", "\n+ | `probeshim_probes_total` |"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("checkDoc = %v, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Metrics reference") {
		t.Errorf("checkDoc lists a line both files have: %v", err)
	}
}
