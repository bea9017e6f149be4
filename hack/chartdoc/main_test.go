// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// charts/probeshim/README.md is what values.yaml, values.schema.json and Chart.yaml make: a value
// added, removed, or with another default or comment, without the README regenerated fails here
// (and in make verify-generated).
func TestDocCurrent(t *testing.T) {
	if err := checkDoc("../../charts/probeshim", "../../charts/probeshim/README.md"); err != nil {
		t.Fatal(err)
	}
}

// A key of values.yaml that the schema does not describe fails the generator, naming the key.
func TestValueWithoutSchema(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"Chart.yaml", "values.schema.json"} {
		b, err := os.ReadFile(filepath.Join("../../charts/probeshim", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	vals := "# The webhooks.\nwebhook:\n  # New.\n  retries: 3\n"
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(vals), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := render(dir); err == nil || !strings.Contains(err.Error(), "webhook.retries has no schema") {
		t.Errorf("render = %v, want it to name webhook.retries", err)
	}
}

// Comments are Markdown in a table cell: angle brackets outside code show, a "|" stays in its cell.
func TestComment(t *testing.T) {
	got := comment("# user <prefix><node> in `a|<b>`\n#\n# next | line")
	if want := "user &lt;prefix&gt;&lt;node&gt; in `a\\|<b>` next \\| line"; got != want {
		t.Errorf("comment = %q, want %q", got, want)
	}
}
