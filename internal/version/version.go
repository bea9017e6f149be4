// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package version describes a probeshim binary: the version the build gave it (-ldflags -X), the
// commit Go stamped into it from git, and the Go version that built it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// CommitFlag is the -X flag that sets the commit: -ldflags "-X <CommitFlag>=<commit>".
const CommitFlag = "github.com/probeshim/probeshim/internal/version.commit"

// CommitDateFlag is the -X flag that sets the commit's date (RFC 3339): from git, never the build's
// clock, so that builds of one commit stay identical.
const CommitDateFlag = "github.com/probeshim/probeshim/internal/version.commitDate"

// commit and commitDate are set at build time (see CommitFlag, CommitDateFlag); builds without
// them fall back to Go's own VCS stamp, which -buildvcs=false (or a build outside git) leaves out.
var commit, commitDate string

// String is "<version> (commit <commit> of <date>, <go version> <os>/<arch>)" for the version the
// binary was built with.
func String(version string) string {
	return fmt.Sprintf("%s (commit %s of %s, %s %s/%s)", version, Commit(), CommitDate(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// CommitDate is when the commit was made (RFC 3339), or "unknown".
func CommitDate() string {
	if commitDate != "" {
		return commitDate
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.time" {
				return s.Value
			}
		}
	}
	return "unknown"
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

// BuildInfo is the gauge probeshim_build_info, always 1, whose labels say what runs (as
// node_exporter's and Prometheus' own build_info): join it to any series by instance to see which
// version reported it.
func BuildInfo(version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "probeshim_build_info",
		Help: "Always 1; its labels are the version, commit and Go version of the running binary.",
		ConstLabels: prometheus.Labels{"version": version, "revision": Commit(), "commit_date": CommitDate(), "goversion": runtime.Version(),
			"goos": runtime.GOOS, "goarch": runtime.GOARCH},
	})
	g.Set(1)
	return g
}
