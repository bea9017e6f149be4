// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import "testing"

// The page is checked current by make verify-generated (`go run ./hack/clidoc -check`), not here: it
// builds the programs, which Go's test cache would not see change.

func TestDropSection(t *testing.T) {
	help := "Usage:\n  x [flags]\n\nFlags:\n  -h\n\nGlobal Flags:\n  --as string\n  --context string\n\nUse \"x --help\"."
	want := "Usage:\n  x [flags]\n\nFlags:\n  -h\n\nUse \"x --help\"."
	if got := dropSection(help, "Global Flags:"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	last := "Flags:\n  -h\n\nGlobal Flags:\n  --as string"
	if got := dropSection(last, "Global Flags:"); got != "Flags:\n  -h" {
		t.Errorf("a last section: got %q", got)
	}
}

func TestDisplayName(t *testing.T) {
	for in, want := range map[string]string{"kubectl-probeshim": "kubectl probeshim", "probeshim": "probeshim"} {
		if got := displayName(in); got != want {
			t.Errorf("displayName(%q) = %q, want %q", in, got, want)
		}
	}
}
