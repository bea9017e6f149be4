// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package version describes a probeshim binary: the version the build gave it (-ldflags -X), the
// commit Go stamped into it from git, and the Go version that built it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// CommitFlag is the -X flag that sets the commit: -ldflags "-X <CommitFlag>=<commit>".
const CommitFlag = "github.com/probeshim/probeshim/internal/version.commit"

// commit is set at build time (see CommitFlag); builds without it fall back to Go's own VCS
// stamp, which -buildvcs=false (or a build outside git) leaves out.
var commit string

// String is "<version> (commit <commit>, <go version> <os>/<arch>)" for the version the binary was
// built with.
func String(version string) string {
	return fmt.Sprintf("%s (commit %s, %s %s/%s)", version, Commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// Commit is the git commit the binary was built from, or "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return commitOf(info.Settings)
}

func commitOf(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}
