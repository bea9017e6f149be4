// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package docrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The marked blocks are found in path and page order, with their text; a marker that marks no
// block is an error.
func TestDocBlocks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.md", "# B\n"+Marker+"\n```sh\necho b1\n```\n\n```sh\necho not marked\n```\n"+Marker+"\n```sh\necho b2\necho b3\n```\n")
	write("a/x.md", Marker+"\n```sh\necho a\n```\n")
	write("c.txt", Marker+"\n```sh\necho not markdown\n```\n")
	blocks, err := Blocks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range blocks {
		rel, _ := filepath.Rel(dir, b.Page)
		got = append(got, rel+":"+strings.ReplaceAll(strings.TrimSpace(b.Text), "\n", ";"))
	}
	if want := "a/x.md:echo a|b.md:echo b1|b.md:echo b2;echo b3"; strings.Join(got, "|") != want {
		t.Errorf("blocks %q, want %q", strings.Join(got, "|"), want)
	}
	if blocks[1].Line != 3 {
		t.Errorf("b.md's first block opens on line %d, want 3", blocks[1].Line)
	}

	write("d.md", Marker+"\n```yaml\nkind: Pod\n```\n")
	if _, err := Blocks(dir); err == nil || !strings.Contains(err.Error(), "d.md:1") {
		t.Errorf("a marker before a yaml block: %v", err)
	}
}
