// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/probeshim/probeshim/internal/build/ociimage"
)

// cyclonedxGomod is the SBOM generator, pinned in hack/tools/go.mod.
const cyclonedxGomod = "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"

// sbomGen makes the SBOMs: `cyclonedx-gomod app` per main package and platform, merged into
// one SBOM per artifact.
type sbomGen struct {
	tool string // the cyclonedx-gomod binary
	src  string // the module's copy it reads (see newSBOMGen)
	apps map[string]*cdx.BOM
}

// newSBOMGen builds cyclonedx-gomod for this machine (`go tool` would build it for GOARCH, the
// target's) and prepares the source it reads. cyclonedx-gomod takes the main module's version
// from git with go-git, which cannot open a linked worktree or a shared clone
// (CycloneDX/cyclonedx-gomod#436), and derives a pseudo-version of its own anyway. So it reads a
// copy of the checkout (tracked and untracked files, as go build sees them) inside a one-commit
// repository tagged with moduleVersion (goModuleVersion): the SBOMs name the main module as in a
// plain clone, in any checkout.
func newSBOMGen(ctx context.Context, root, tmp, moduleVersion string) (*sbomGen, error) {
	g := &sbomGen{tool: filepath.Join(tmp, "cyclonedx-gomod"), apps: map[string]*cdx.BOM{}}
	env := hostEnv()
	if _, err := run(ctx, root, env, "go", "build", "-modfile=hack/tools/go.mod", "-o", g.tool, cyclonedxGomod); err != nil {
		return nil, err
	}
	repo := filepath.Join(tmp, "sbom-src")
	g.src = filepath.Join(repo, "module")
	files, err := run(ctx, root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	for _, f := range strings.Split(files, "\x00") {
		if f == "" {
			continue
		}
		src := filepath.Join(root, f)
		if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the worktree, or a symlink or submodule: nothing go list reads
		}
		if err := copyFile(src, filepath.Join(g.src, f)); err != nil {
			return nil, err
		}
	}
	git := []string{"git", "-c", "user.name=release", "-c", "user.email=release@invalid", "-C", repo}
	for _, argv := range [][]string{
		{"git", "init", "-q", repo},
		append(git, "commit", "-q", "--allow-empty", "-m", "the module's copy for cyclonedx-gomod"),
		append(git, "tag", moduleVersion),
	} {
		if _, err := run(ctx, root, env, argv...); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// app returns the SBOM of the main package pkg (e.g. ./shim/cmd/probeshim) built for p as the
// release builds it (static), its main component named version.
func (g *sbomGen) app(ctx context.Context, pkg string, p ociimage.Platform, version string) (*cdx.BOM, error) {
	key := pkg + " " + p.OS + "_" + p.Arch
	if b, ok := g.apps[key]; ok {
		return b, nil
	}
	out := filepath.Join(filepath.Dir(g.src), strings.NewReplacer("/", "_", ".", "_").Replace(key)+".json")
	env := append(hostEnv(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
	// No serial number, no timestamp: the merged SBOM gets the commit's date (see merge).
	if _, err := run(ctx, g.src, env, g.tool, "app", "-json", "-noserial", "-notimestamp",
		"-main", strings.TrimPrefix(pkg, "./"), "-output", out, "."); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	b := new(cdx.BOM)
	if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(b); err != nil {
		return nil, fmt.Errorf("%s: %w", out, err)
	}
	if b.Metadata == nil || b.Metadata.Component == nil {
		return nil, fmt.Errorf("cyclonedx-gomod gave no main component for %s", key)
	}
	if got := b.Metadata.Component.Version; got != version {
		return nil, fmt.Errorf("cyclonedx-gomod named %s version %s, not %s", key, got, version)
	}
	g.apps[key] = b
	return b, nil
}

// goModuleVersion is the main module's version as Go's VCS stamp writes it (and cyclonedx-gomod
// reads it in a plain clone): the release tag on HEAD, else a pseudo-version after the newest
// tag, "+dirty" with uncommitted changes. The release computes it because builds here may not stamp
// it (GOFLAGS=-buildvcs=false), and its commit and date are the ones internal/version carries.
func goModuleVersion(ctx context.Context, root string, g ociimage.Git) (string, error) {
	rev := strings.TrimSuffix(g.Revision, "+dirty")
	var v string
	if tag, err := run(ctx, root, nil, "git", "describe", "--tags", "--exact-match", "--match", "v[0-9]*", "HEAD"); err == nil && semver.IsValid(tag) {
		v = tag
	} else {
		older, err := run(ctx, root, nil, "git", "describe", "--tags", "--abbrev=0", "--match", "v[0-9]*", "HEAD")
		if err != nil || !semver.IsValid(older) {
			older = ""
		}
		ct, err := run(ctx, root, nil, "git", "log", "-1", "--format=%ct")
		if err != nil {
			return "", err
		}
		sec, err := strconv.ParseInt(ct, 10, 64)
		if err != nil || len(rev) < 12 {
			return "", fmt.Errorf("commit %q of %q", rev, ct)
		}
		v = module.PseudoVersion("", older, time.Unix(sec, 0), rev[:12])
	}
	if rev != g.Revision {
		v += "+dirty"
	}
	return v, nil
}

// mergeSBOM returns the SBOM of one artifact (a file, or a container image) holding the
// binaries whose SBOMs apps are: the artifact is the main component, with its SHA-256, version
// and the binaries as its subcomponents; the modules are the union of the binaries'. Every
// bom-ref becomes the component's package URL, which names goos and goarch, so the binaries of
// two architectures (the image's) stay apart. Dated date (the commit's), so it is reproducible.
func mergeSBOM(artifact string, typ cdx.ComponentType, version string, data []byte, apps []*cdx.BOM, date time.Time) *cdx.BOM {
	sum := sha256.Sum256(data)
	ref := "probeshim-release:" + artifact
	top := &cdx.Component{BOMRef: ref, Type: typ, Name: artifact, Version: version,
		Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}}}
	var bins []cdx.Component
	components := map[string]cdx.Component{}
	deps := map[string]map[string]bool{ref: {}}
	for _, a := range apps {
		refs := map[string]string{} // the app SBOM's bom-ref -> purl
		main := *a.Metadata.Component
		refs[main.BOMRef] = main.PackageURL
		main.BOMRef = main.PackageURL
		bins = append(bins, main)
		deps[ref][main.BOMRef] = true
		if a.Components != nil {
			for _, c := range *a.Components {
				refs[c.BOMRef] = c.PackageURL
				c.BOMRef = c.PackageURL
				components[c.BOMRef] = c
			}
		}
		if a.Dependencies != nil {
			for _, d := range *a.Dependencies {
				from := refs[d.Ref]
				if from == "" {
					continue
				}
				if deps[from] == nil {
					deps[from] = map[string]bool{}
				}
				if d.Dependencies != nil {
					for _, to := range *d.Dependencies {
						if refs[to] != "" {
							deps[from][refs[to]] = true
						}
					}
				}
			}
		}
	}
	sort.Slice(bins, func(i, j int) bool { return bins[i].BOMRef < bins[j].BOMRef })
	top.Components = &bins
	comps := make([]cdx.Component, 0, len(components))
	for _, c := range components {
		comps = append(comps, c)
	}
	sort.Slice(comps, func(i, j int) bool { return comps[i].BOMRef < comps[j].BOMRef })
	dependencies := make([]cdx.Dependency, 0, len(deps))
	for from, tos := range deps {
		list := make([]string, 0, len(tos))
		for to := range tos {
			list = append(list, to)
		}
		sort.Strings(list)
		dependencies = append(dependencies, cdx.Dependency{Ref: from, Dependencies: &list})
	}
	sort.Slice(dependencies, func(i, j int) bool { return dependencies[i].Ref < dependencies[j].Ref })

	b := cdx.NewBOM()
	b.Metadata = &cdx.Metadata{Timestamp: date.UTC().Format(time.RFC3339), Component: top}
	if len(apps) > 0 && apps[0].Metadata.Tools != nil {
		b.Metadata.Tools = apps[0].Metadata.Tools
	}
	b.Components = &comps
	b.Dependencies = &dependencies
	return b
}

// writeSBOM writes b as JSON to p.
func writeSBOM(p string, b *cdx.BOM) error {
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).Encode(b); err != nil {
		return err
	}
	return writeFile(p, buf.Bytes())
}

// hostEnv is the environment without the target's GOOS, GOARCH and CGO_ENABLED, for what runs here.
func hostEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "GOOS" && k != "GOARCH" && k != "CGO_ENABLED" {
			env = append(env, kv)
		}
	}
	return env
}
