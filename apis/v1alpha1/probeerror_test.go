// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1

import (
	"strings"
	"testing"
)

// What the node service writes, the cluster part reads back: reason and detail.
func TestProbeErrorRoundTrip(t *testing.T) {
	for _, tc := range []struct{ reason, detail, msg string }{
		{"CommandNotFound", `exec: "nc": executable file not found in $PATH`, `probe error (CommandNotFound): exec: "nc": executable file not found in $PATH`},
		{"TargetRefused", "probe refused: probe host \"10.0.0.1\" is not the pod (a): b", "probe error (TargetRefused): probe refused: probe host \"10.0.0.1\" is not the pod (a): b"},
		{"RuntimeError", "", "probe error (RuntimeError)"},
	} {
		msg := ProbeErrorMessage(tc.reason, tc.detail)
		if msg != tc.msg {
			t.Errorf("ProbeErrorMessage(%q, %q) = %q, want %q", tc.reason, tc.detail, msg, tc.msg)
		}
		if r, d, ok := ParseProbeError(msg); !ok || r != tc.reason || d != tc.detail {
			t.Errorf("ParseProbeError(%q) = %q, %q, %t", msg, r, d, ok)
		}
	}
	// A reason that is not a CamelCase word is written as the generic one, and still parses.
	for _, bad := range []string{"", "commandNotFound", "Not Found", "Bad)", strings.Repeat("A", 65)} {
		msg := ProbeErrorMessage(bad, "x")
		if r, d, ok := ParseProbeError(msg); !ok || r != EventReasonProbeError || d != "x" {
			t.Errorf("reason %q: %q parses as %q, %q, %t", bad, msg, r, d, ok)
		}
	}
}

// Any other message has no reason: a probe's output, the old format, a cut prefix.
func TestParseProbeErrorRejects(t *testing.T) {
	for _, msg := range []string{
		"",
		"container is not running",
		"probe error: command not found: exec: ...",
		"probe error (CommandNotFo…",
		"probe error (CommandNotFound)x",
		"probe error (Command NotFound): x",
		"probe error (): x",
		" probe error (CommandNotFound): x",
	} {
		if r, d, ok := ParseProbeError(msg); ok {
			t.Errorf("ParseProbeError(%q) = %q, %q, true; want not ok", msg, r, d)
		}
	}
}
