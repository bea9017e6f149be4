// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package logtail

import "testing"

func TestLast(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb", 5, "a\nb"},
		{"", 3, ""},
	} {
		if got := Last(tt.in, tt.n); got != tt.want {
			t.Errorf("Last(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
