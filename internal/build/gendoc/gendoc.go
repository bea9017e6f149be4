// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package gendoc is what the generators of checked-in documents (hack/metricsdoc, hack/chartdoc, hack/apidoc, hack/configdoc)
// share: the check that a committed file is what its generator writes, with the lines that differ.
package gendoc

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Main is a generator's main: the flags -o (the file, defaultOut unless given) and -check, beside
// any the generator registered before; then render's document written to the file, or checked
// against it. It exits 1 with name's error.
func Main(name, defaultOut string, render func() ([]byte, error)) {
	check := flag.Bool("check", false, "write nothing; fail when the file is not what would be written")
	out := flag.String("o", defaultOut, "the file to write")
	flag.Parse()
	doc, err := render()
	if err == nil {
		err = Write(*out, doc, *check)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Write writes doc to path, as a generator's plain run does; with check (its -check flag) it writes
// nothing and fails as Check does.
func Write(path string, doc []byte, check bool) error {
	if check {
		return Check(path, doc)
	}
	return os.WriteFile(path, doc, 0o644)
}

// Check fails when the file at path is not want, saying to regenerate and which lines differ.
func Check(path string, want []byte) error {
	have, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if bytes.Equal(have, want) {
		return nil
	}
	return fmt.Errorf("%s is stale: run 'make generate' and commit the result\n%s", path, lineDiff(have, want))
}

// lineDiff lists the lines only in have (-) and only in want (+): enough to see what changed in
// a generated document.
func lineDiff(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	var b strings.Builder
	for _, l := range h {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range w {
		if !slices.Contains(h, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}
