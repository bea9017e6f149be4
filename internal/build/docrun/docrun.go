// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package docrun finds the shell blocks of the docs that are marked to be run (issue 34 item 4):
// hack/docscheck checks the markers without a cluster, e2e/examples runs the blocks on the rig.
package docrun

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Marker precedes a shell block of the docs that a user types on the demo cluster: e2e/examples
// runs the marked blocks in order on the rig (docs/how-to/index.md tells writers so).
const Marker = "<!-- demo: run -->"

// Block is one marked shell block: the page, the line its fence opens on, and its text.
type Block struct {
	Page string
	Line int
	Text string
}

// Blocks returns the marked shell blocks of the Markdown pages under dir, in path order and in
// page order within a page. A marker not followed by a ```sh fence is an error: the block it meant
// would silently not run.
func Blocks(dir string) ([]Block, error) {
	var pages []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(pages)
	var out []Block
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != Marker {
				continue
			}
			if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
				return nil, fmt.Errorf("%s:%d: %s is not followed by a ```sh block", page, i+1, Marker)
			}
			b := Block{Page: page, Line: i + 2}
			var text []string
			for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				text = append(text, lines[i])
			}
			if i == len(lines) {
				return nil, fmt.Errorf("%s:%d: the block does not end", page, b.Line)
			}
			b.Text = strings.Join(text, "\n") + "\n"
			out = append(out, b)
		}
	}
	return out, nil
}
