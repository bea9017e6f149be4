// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package debpkg installs, for Go tests and tools, the Debian packages of groups of packages.txt (the
// project's one list), so that every target installs what it needs on a fresh machine instead of
// relying on what an earlier session left behind. The list is read, and the packages installed, by
// hack/ensure-packages.sh alone, which every make target runs too: one parser of the list, one
// installer that takes apt's lock one at a time.
package debpkg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

// script is hack/ensure-packages.sh from the module root.
const script = "hack/ensure-packages.sh"

// Ensure installs the packages of groups that are missing, without recommends (so the list names
// everything that is used); without root it fails with the command to run.
func Ensure(ctx context.Context, logf func(string, ...any), groups ...string) error {
	_, err := run(ctx, logWriter(logf), groups...)
	return err
}

// logWriter passes each write of the script's messages (a line: it echoes them) to logf as it comes.
type logWriter func(string, ...any)

func (l logWriter) Write(b []byte) (int, error) {
	if s := strings.TrimSpace(string(b)); s != "" {
		l("%s", s)
	}
	return len(b), nil
}

// List returns the names of the packages in any of groups, in the list's order.
func List(ctx context.Context, groups ...string) ([]string, error) {
	out, err := run(ctx, io.Discard, append([]string{"--list"}, groups...)...)
	return strings.Fields(out), err
}

// run runs the script with args and returns its standard output; its messages (standard error) go to
// progress as they come, and the last of them into the error.
func run(ctx context.Context, progress io.Writer, args ...string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, script), args...)
	var out, msgs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(&msgs, progress)
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", script, strings.Join(args, " "), err, logtail.Last(msgs.String(), 30))
	}
	return out.String(), nil
}

// moduleRoot is the directory above the working directory that holds the script: tests run in
// their package's directory, tools from the module root.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, script)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("debpkg: no " + script + " in the working directory or above it (run from the probeshim tree)")
		}
		dir = parent
	}
}
