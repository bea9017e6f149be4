// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package logtail cuts a log or a command's output down to its end, where the error usually is,
// for error messages and test failures.
package logtail

import "strings"

// Last returns the last n lines of s.
func Last(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
