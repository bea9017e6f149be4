// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package termsafe

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcödé ✓": "plain text, ünïcödé ✓",
		`C:\path`:               `C:\\path`,
		"a\x00b":                `a\x00b`,
		"\u200b\ufeff":          `\u200b\ufeff`,
		"\ufffd":                "\ufffd",
		"bad \xc3":              `bad \xc3`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
