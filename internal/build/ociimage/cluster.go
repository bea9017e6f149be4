// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package ociimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/probeshim/probeshim/internal/build/buildstore"
	"github.com/probeshim/probeshim/internal/build/command"
	"github.com/probeshim/probeshim/internal/version"
)

// The probeshim-cluster image as `make image` builds it and the rig runs it.
const (
	ClusterTitle  = "probeshim-cluster"
	ClusterBinary = "/bin/probeshim-cluster"
	ClusterPkg    = "./cluster/cmd/probeshim-cluster"
	SourceURL     = "https://github.com/probeshim/probeshim"
)

// Platforms are the platforms of a release: linux/amd64 and linux/arm64.
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// Git is what the build takes from the checkout at root.
type Git struct {
	Version  string    // packaging/version.sh (PROBESHIM_VERSION overrides it)
	Revision string    // the commit, "+dirty" with uncommitted changes
	Created  time.Time // SOURCE_DATE_EPOCH, else the commit's time
}

// FromGit reads Git from the checkout at root.
func FromGit(ctx context.Context, root string) (Git, error) {
	var g Git
	out, err := run(ctx, root, nil, "packaging/version.sh")
	if err != nil {
		return g, err
	}
	g.Version = out
	if g.Revision, err = run(ctx, root, nil, "git", "rev-parse", "HEAD"); err != nil {
		return g, err
	}
	if strings.HasSuffix(g.Version, ".dirty") {
		g.Revision += "+dirty"
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = run(ctx, root, nil, "git", "log", "-1", "--format=%ct"); err != nil {
			return g, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return g, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	g.Created = time.Unix(sec, 0).UTC()
	return g, nil
}

// Tag is the image tag of a package version: OCI tags allow neither "~" nor "+", so
// 0.0.0~git20261129101500.abc1234 becomes 0.0.0-git20261129101500.abc1234 and
// 1.2.3+git20261129101500.3.abc1234 becomes 1.2.3_git20261129101500.3.abc1234 (Helm's mapping of "+").
func Tag(version string) string {
	return strings.NewReplacer("~", "-", "+", "_").Replace(version)
}

// ClusterSpec builds probeshim-cluster for each platform into dir (static, -trimpath, the
// version in main.version) and returns the image's Spec.
func ClusterSpec(ctx context.Context, root, dir string, g Git, platforms []Platform) (Spec, error) {
	spec := Spec{Title: ClusterTitle, Binary: ClusterBinary, Binaries: map[Platform]string{},
		Version: g.Version, Revision: g.Revision, Source: SourceURL, Created: g.Created}
	for _, p := range platforms {
		out := filepath.Join(dir, p.OS+"-"+p.Arch, filepath.Base(ClusterBinary))
		if err := GoBuild(ctx, root, ClusterPkg, p, g, out); err != nil {
			return spec, err
		}
		spec.Binaries[p] = out
	}
	return spec, nil
}

// GoBuild cross-compiles the main package pkg of the module at root for p into out: static
// (CGO_ENABLED=0), -trimpath, stripped, with g's version in main.version and its commit and
// the commit's date (g.Created: SOURCE_DATE_EPOCH, else the commit's) in internal/version.
func GoBuild(ctx context.Context, root, pkg string, p Platform, g Git, out string) error {
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	ldflags := "-s -w -X main.version=" + g.Version + " -X " + version.CommitFlag + "=" + g.Revision +
		" -X " + version.CommitDateFlag + "=" + g.Created.UTC().Format(time.RFC3339)
	name := filepath.Base(out)
	key := []string{root, "CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Arch, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", name, pkg}
	return buildstore.Build(ctx, key, filepath.Dir(out), func(dir string) error {
		_, err := run(ctx, root, env, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(dir, name), pkg)
		return err
	})
}

// run is command.Output.
var run = command.Output
