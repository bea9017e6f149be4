// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Row is one supported pair of the test matrix: the Kubernetes and containerd
// versions the rig runs. The patch versions are pinned by the build scripts'
// modules (e2e/kubebin, e2e/containerdbin); a row names the minor lines and
// picks the built folders of those lines from the cache.
type Row struct {
	// Name is what PROBESHIM_ROW (make ROW=) says, e.g. "k1.37-c2.4".
	Name string
	// Kube is the Kubernetes minor line, the argument of e2e/kubebin/build.sh.
	Kube string
	// Containerd is the containerd minor line; ContainerdBuild the argument
	// of e2e/containerdbin/build.sh; ConfigVersion the config format
	// (3: containerd 2's plugin names, 2: 1.7's io.containerd.grpc.v1.cri).
	Containerd      string
	ContainerdBuild string
	ConfigVersion   int
}

// Rows are the supported pairs, row 1 first: the default, on which every
// suite runs. Row 2 is the last Kubernetes release that supports containerd
// 1.x, on the last 1.x line.
var Rows = []Row{
	{Name: "k1.37-c2.4", Kube: "1.37", Containerd: "2.4", ContainerdBuild: "v2", ConfigVersion: 3},
	{Name: "k1.35-c1.7", Kube: "1.35", Containerd: "1.7", ContainerdBuild: "v1", ConfigVersion: 2},
}

// CurrentRow is the row PROBESHIM_ROW names, or row 1 when it is unset.
func CurrentRow() (Row, error) {
	name := os.Getenv("PROBESHIM_ROW")
	if name == "" {
		return Rows[0], nil
	}
	for _, r := range Rows {
		if r.Name == name {
			return r, nil
		}
	}
	var names []string
	for _, r := range Rows {
		names = append(names, r.Name)
	}
	return Row{}, fmt.Errorf("PROBESHIM_ROW=%q: not a row of the matrix (%s)", name, strings.Join(names, ", "))
}

// ContainerdBinaries are the programs the rig needs in Config.ContainerdBin.
var ContainerdBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

func cacheDir() string {
	if c := os.Getenv("PROBESHIM_CACHE"); c != "" {
		return c
	}
	return "/var/cache/probeshim"
}

// newestComplete is the most recently built folder among
// $PROBESHIM_CACHE/<kind>/v<line>.* that has every one of bins, or "".
func newestComplete(kind, line string, bins []string) string {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir(), kind, "v"+line+".*"))
	sort.Slice(dirs, func(i, j int) bool { return modTime(dirs[i]).After(modTime(dirs[j])) })
	for _, d := range dirs {
		if missingIn(d, bins) == nil {
			return d
		}
	}
	return ""
}

// missingIn lists the bins that dir lacks or that are not executable.
func missingIn(dir string, bins []string) []string {
	var out []string
	for _, b := range bins {
		if st, err := os.Stat(filepath.Join(dir, b)); dir == "" || err != nil || st.Mode()&0o111 == 0 {
			out = append(out, b)
		}
	}
	return out
}

// DefaultContainerdBin returns $PROBESHIM_CONTAINERD_BIN, or else the most
// recently built folder of the current row's containerd line under
// $PROBESHIM_CACHE/containerd, or "".
func DefaultContainerdBin() string {
	if d := os.Getenv("PROBESHIM_CONTAINERD_BIN"); d != "" {
		return d
	}
	row, err := CurrentRow()
	if err != nil {
		return ""
	}
	return newestComplete("containerd", row.Containerd, ContainerdBinaries)
}

// DefaultRunc returns $PROBESHIM_RUNC, or else the runc most recently built
// under $PROBESHIM_CACHE/runc (e2e/containerdbin/build.sh runc), or "".
func DefaultRunc() string {
	if p := os.Getenv("PROBESHIM_RUNC"); p != "" {
		return p
	}
	dirs, _ := filepath.Glob(filepath.Join(cacheDir(), "runc", "v*"))
	sort.Slice(dirs, func(i, j int) bool { return modTime(dirs[i]).After(modTime(dirs[j])) })
	for _, d := range dirs {
		if missingIn(d, []string{"runc"}) == nil {
			return filepath.Join(d, "runc")
		}
	}
	return ""
}
