// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestCommitOf(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "unknown"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}, "abc123"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}, "abc123+dirty"},
	} {
		if got := commitOf(tc.settings); got != tc.want {
			t.Errorf("commitOf(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	got := String("1.2.3")
	if !strings.HasPrefix(got, "1.2.3 (commit ") || !strings.Contains(got, runtime.Version()) {
		t.Errorf("String = %q: want the version, a commit and %s", got, runtime.Version())
	}
}
