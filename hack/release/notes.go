// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxChangelog bounds the changelog: a first release would otherwise list every commit.
const maxChangelog = 200

// changelog returns the release's changelog: the subjects of the commits since the previous
// release tag (v*), or since the first commit when there is none, newest first, merges left out,
// at most maxChangelog of them. The curated notes stay in CHANGELOG.md.
func changelog(ctx context.Context, root, version string) ([]byte, error) {
	prev := previousTag(ctx, root)
	rev, since := "HEAD", "the first commit"
	if prev != "" {
		rev, since = prev+"..HEAD", prev
	}
	n, err := run(ctx, root, nil, "git", "rev-list", "--count", "--no-merges", rev)
	if err != nil {
		return nil, err
	}
	total, err := strconv.Atoi(n)
	if err != nil {
		return nil, fmt.Errorf("git rev-list --count: %q", n)
	}
	// A fixed abbreviation: git's default grows with the repository, and the file must not.
	log, err := run(ctx, root, nil, "git", "log", "--no-merges", "--abbrev=12", "--format=- %s (%h)",
		"-n", strconv.Itoa(maxChangelog), rev)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# probeshim %s\n\nChanges since %s (%d commits, merges left out):\n\n", version, since, total)
	if log != "" {
		b.WriteString(log + "\n")
	}
	if total > maxChangelog {
		fmt.Fprintf(&b, "- … and %d earlier commits\n", total-maxChangelog)
	}
	return []byte(b.String()), nil
}

// previousTag is the newest release tag before HEAD ("" if none): when HEAD is a release tag
// itself, the one before it.
func previousTag(ctx context.Context, root string) string {
	base := "HEAD"
	if _, err := run(ctx, root, nil, "git", "describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD"); err == nil {
		if _, err := run(ctx, root, nil, "git", "rev-parse", "-q", "--verify", "HEAD^"); err != nil {
			return ""
		}
		base = "HEAD^"
	}
	tag, err := run(ctx, root, nil, "git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", base)
	if err != nil {
		return ""
	}
	return tag
}

// chart runs `make chart` when the Makefile has that target (the chart's packaging and its version
// handling belong to it), asking it to write into dir: CHART_DIST=dir on its command line and in
// its environment. It returns the chart packages (*.tgz) it wrote there or, failing that, the
// .tgz paths it printed; with no such target it returns none and says so.
func chart(ctx context.Context, root, dir string) ([]string, error) {
	// make -q runs no recipe; it exits 2 and says "No rule to make target" when chart is missing.
	if out, err := runCombined(ctx, root, nil, "make", "--no-print-directory", "-q", "chart"); err != nil &&
		strings.Contains(out, "No rule to make target") {
		logf("chart: skipped, the Makefile has no chart target yet (the release then ships no chart package)")
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env := append(os.Environ(), "CHART_DIST="+dir)
	out, err := run(ctx, root, env, "make", "--no-print-directory", "-s", "chart", "CHART_DIST="+dir)
	if err != nil {
		return nil, err
	}
	pkgs, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		for _, line := range strings.Split(out, "\n") {
			p := strings.TrimSpace(line)
			if strings.HasSuffix(p, ".tgz") {
				if !filepath.IsAbs(p) {
					p = filepath.Join(root, p)
				}
				if _, err := os.Stat(p); err == nil {
					pkgs = append(pkgs, p)
				}
			}
		}
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("make chart wrote no chart package (*.tgz) into CHART_DIST=%s and printed no path of one", dir)
	}
	return pkgs, nil
}
