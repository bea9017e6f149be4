// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package command runs the build tools the release programs call (go, git, nfpm, createrepo_c):
// their output as a value, their complaints in the error.
package command

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Output runs argv in dir (env nil: this process's) and returns its trimmed stdout; its stderr
// goes into the error.
func Output(ctx context.Context, dir string, env []string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}
