// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// defaultExecGrace is how long past the probe timeout the engine waits for
// an Execer that failed to enforce the timeout itself.
const defaultExecGrace = 5 * time.Second

func (m *Manager) probeExec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (Result, string, error) {
	if m.exec == nil {
		return Failure, "exec probes are not supported: no exec runner configured", nil
	}
	if len(cmd) == 0 {
		return Failure, "exec probe has no command", nil
	}
	ectx, cancel := context.WithTimeout(ctx, timeout+m.execGrace)
	defer cancel()
	res, err := m.exec.Exec(ectx, containerID, cmd, timeout)
	if errors.Is(err, ErrExecTimeout) || (err != nil && ctx.Err() == nil && errors.Is(ectx.Err(), context.DeadlineExceeded)) {
		return Failure, fmt.Sprintf("command timed out after %s", timeout), nil
	}
	if err != nil {
		return Unknown, "", err
	}
	out := res.Output
	if len(out) > MaxOutput {
		out = out[:MaxOutput]
	}
	if res.ExitCode == 0 {
		return Success, string(out), nil
	}
	if len(out) == 0 {
		return Failure, fmt.Sprintf("command exited with code %d", res.ExitCode), nil
	}
	return Failure, string(out), nil
}

// probeFile runs an exec-free probe: the file's content is the message, as
// `cat`'s output would be, and success; a file `cat` could not read is a
// failure with the reader's error as the message. Where the reader cannot
// read as the container's user, cmd runs instead.
func (m *Manager) probeFile(ctx context.Context, containerID, path string, cmd []string, timeout time.Duration) (Result, string, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout+m.execGrace)
	defer cancel()
	out, err := m.files.ReadFile(rctx, containerID, path, MaxOutput, timeout)
	switch {
	case errors.Is(err, ErrReadUnsupported):
		cancel()
		return m.probeExec(ctx, containerID, cmd, timeout)
	case errors.Is(err, ErrExecTimeout) || (err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded)):
		return Failure, fmt.Sprintf("command timed out after %s", timeout), nil
	case errors.Is(err, ErrFileUnreadable):
		return Failure, err.Error(), nil
	case err != nil:
		return Unknown, "", err
	}
	if len(out) > MaxOutput {
		out = out[:MaxOutput]
	}
	return Success, string(out), nil
}
