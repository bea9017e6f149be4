// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command docscheck checks the relative links of README.md and docs/: every linked file exists, and
// every #anchor names a heading of its page, as both GitHub and MkDocs spell heading anchors (the
// MkDocs that `make docs` runs checks files, not anchors). It prints each broken link and exits 1.
// Its test runs it in `make unit`.
//
//	go run ./hack/docscheck [-root .]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	broken, err := check(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(1)
	}
	for _, b := range broken {
		fmt.Println(b)
	}
	if len(broken) > 0 {
		os.Exit(1)
	}
}

// pages are the Markdown files whose links are checked.
func pages(root string) ([]string, error) {
	out := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return err
	})
	return out, err
}

var (
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
)

// check returns every broken link, as "file:line: link: why".
func check(root string) ([]string, error) {
	files, err := pages(root)
	if err != nil {
		return nil, err
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingAnchors(b)
		anchors[path] = a
		return a, nil
	}
	var broken []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, f)
		for n, line := range proseLines(b) {
			if line == "" {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), path)
					if _, err := os.Stat(dest); err != nil {
						broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file", rel, n+1, target))
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					return nil, err
				}
				if !a[anchor] {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: no heading with that anchor", rel, n+1, target))
				}
			}
		}
	}
	return broken, nil
}

// proseLines is the file's lines with those in fenced code blocks emptied (their numbering kept).
func proseLines(b []byte) []string {
	var out []string
	fence := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			out = append(out, "")
			continue
		}
		if fence {
			line = ""
		}
		out = append(out, line)
	}
	return out
}

// headingAnchors is every anchor a link may name on the page: a heading's, where GitHub's and
// MkDocs' spellings agree (a link must work in both), and explicit HTML anchors.
func headingAnchors(b []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range proseLines(b) {
		if m := heading.FindStringSubmatch(line); m != nil {
			text := strings.ReplaceAll(m[1], "`", "")
			if g := githubSlug(text); g == mkdocsSlug(text) {
				out[g] = true
			}
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// githubSlug is GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen.
func githubSlug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// mkdocsSlug is Python-Markdown's toc slugify, MkDocs' default: ASCII only (it folds accents away;
// here such a heading just fails to agree with GitHub's), punctuation dropped, lower case, runs of
// spaces and hyphens one hyphen.
func mkdocsSlug(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > unicode.MaxASCII {
			continue
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || unicode.IsSpace(r) {
			b.WriteRune(r)
		}
	}
	return regexp.MustCompile(`[-\s]+`).ReplaceAllString(strings.ToLower(strings.TrimSpace(b.String())), "-")
}
