// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package upgrade is the upgrade suite: release N of probeshim (built from an earlier commit of
// this repository) installed on the rig — its Helm chart, its probeshim-cluster image from the
// rig's registry and its node package under systemd — then upgraded in place to this tree's.
// Its non-test part builds release N.
package upgrade

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/packaging/rigtest"
)

// ReleaseNCommit is release N, the release the test upgrades from: "Merge branch 'chart'", the
// first commit of main with the Helm chart (and `make image`), i.e. the oldest install a user can
// have made with `helm install`. Pinned by hash so the test upgrades from the same thing every time;
// move it forward to the previous release once releases are tagged.
const ReleaseNCommit = "e2bde0d8e5bf178bb45503a87c61cbf169bfcb1d"

// Package versions: N+1 must sort after N for dpkg to treat the second install as an upgrade.
const (
	VersionN     = "1.0.0~e2e.1"
	VersionNext  = "1.0.0~e2e.2"
	ImageNRef    = rig.Registry + "/probeshim/probeshim-cluster:release-n"
	ImageNRepo   = rig.Registry + "/probeshim/probeshim-cluster"
	cacheSubdir  = "upgrade"
	buildTimeout = 20 * time.Minute
)

// ReleaseN is release N's build: its Helm chart, its image (an OCI layout) and its .deb.
type ReleaseN struct {
	Chart string // charts/probeshim of that commit
	Image string // the OCI layout `make image` wrote (dist/image/probeshim-cluster)
	Deb   string // the node package for this machine's architecture, version VersionN
}

// BuildReleaseN builds release N from ReleaseNCommit — a clone of this repository checked out at
// that commit, its own `make image` (go run ./hack/image) and packaging/build.sh — or returns the
// build cached in $PROBESHIM_CACHE/upgrade/<commit>-<arch>.
func BuildReleaseN(ctx context.Context, logf func(string, ...any)) (ReleaseN, error) {
	cache := os.Getenv("PROBESHIM_CACHE")
	if cache == "" {
		cache = "/var/cache/probeshim"
	}
	base := filepath.Join(cache, cacheSubdir)
	dir := filepath.Join(base, ReleaseNCommit+"-"+runtime.GOARCH)
	rel := ReleaseN{Chart: filepath.Join(dir, "chart"), Image: filepath.Join(dir, "image")}
	if debs, _ := filepath.Glob(filepath.Join(dir, "*.deb")); len(debs) == 1 {
		rel.Deb = debs[0]
		return rel, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return rel, err
	}
	root, err := framework.ModuleRoot()
	if err != nil {
		return rel, err
	}
	ctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	t0 := time.Now()
	logf("release N: building %s (chart, image, .deb) into %s", ReleaseNCommit[:12], dir)
	tmp, err := os.MkdirTemp(base, ".build-")
	if err != nil {
		return rel, err
	}
	defer os.RemoveAll(tmp)
	src, out := filepath.Join(tmp, "src"), filepath.Join(tmp, "out")
	// A clone, not `git worktree add`: nothing is written into this repository's .git.
	if err := run(ctx, "", "git", "clone", "--quiet", "--shared", "--no-checkout", root, src); err != nil {
		return rel, err
	}
	if err := run(ctx, src, "git", "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", ReleaseNCommit); err != nil {
		return rel, fmt.Errorf("%w (a shallow clone without that commit?)", err)
	}
	if err := run(ctx, src, "go", "run", "./hack/image", "-dist", filepath.Join(tmp, "dist")); err != nil {
		return rel, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return rel, err
	}
	if err := os.Rename(filepath.Join(tmp, "dist", "image", "probeshim-cluster"), filepath.Join(out, "image")); err != nil {
		return rel, err
	}
	pkgs, err := rigtest.Build(ctx, src, "PROBESHIM_VERSION="+VersionN, "PROBESHIM_FORMATS=deb", "PROBESHIM_DIST="+out)
	if err != nil {
		return rel, err
	}
	if err := run(ctx, "", "cp", "-a", filepath.Join(src, "charts", "probeshim"), filepath.Join(out, "chart")); err != nil {
		return rel, err
	}
	if err := os.Rename(out, dir); err != nil {
		return rel, err
	}
	rel.Deb = filepath.Join(dir, filepath.Base(pkgs.Deb))
	logf("release N: built in %s", time.Since(t0).Round(time.Second))
	return rel, nil
}

// ImageN is release N's probeshim-cluster image (all its platforms), pushed by the rig as ImageNRef.
func ImageN() rig.Image {
	return rig.Image{Ref: ImageNRef, Index: func(ctx context.Context, _ string) (v1.ImageIndex, error) {
		rel, err := BuildReleaseN(ctx, logf)
		if err != nil {
			return nil, err
		}
		p, err := layout.FromPath(rel.Image)
		if err != nil {
			return nil, err
		}
		// The layout's index.json holds one entry: the image index `make image` built.
		outer, err := p.ImageIndex()
		if err != nil {
			return nil, err
		}
		m, err := outer.IndexManifest()
		if err != nil {
			return nil, err
		}
		if len(m.Manifests) != 1 {
			return nil, fmt.Errorf("release N's OCI layout %s: %d entries, want 1", rel.Image, len(m.Manifests))
		}
		return outer.ImageIndex(m.Manifests[0].Digest)
	}}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
