// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package server

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
)

// A probe message is tenant output: an exec probe that prints terminal
// escape sequences must not get them interpreted by the terminal of the
// person running `probeshim status`.
func TestWriteStatusEscapesTenantOutput(t *testing.T) {
	now := time.Now()
	evil := "\x1b]0;owned\x07\x1b[2J\x1b[31mred\u009b31m\u202eevil\rover\tcol\x7f\xff"
	st := &Status{Node: "n", Time: now, Probes: []ProbeStatus{{
		Namespace: "ns", Pod: "p", Container: "c", Probe: "x\x1b[1m", Result: "Failure", Message: evil,
	}}}
	var out bytes.Buffer
	if err := WriteStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, r := range out.String() {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			t.Fatalf("output holds %U:\n%q", r, out.String())
		}
	}
	for _, want := range []string{`\x1b]0;owned\x07\x1b[2J\x1b[31mred\u009b31m\u202eevil\x0dover\x09col\x7f\xff`, `x\x1b[1m`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q does not show %s", out.String(), want)
		}
	}
}
