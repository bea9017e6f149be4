// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/probeshim/probeshim/e2e/rig/image"
	"github.com/probeshim/probeshim/internal/build/buildstore"
)

// The images every rig pushes to its registry (Registry) and has every node pull at bring-up.
const (
	// PauseImage is the sandbox image: a static Go pause program.
	PauseImage = Registry + "/probeshim/pause:e2e"
	// TestImage has a static busybox with all its applets on PATH (sh, httpd,
	// wget, nc, sleep, ...) and the project's test servers:
	//   /bin/grpc-health-server  (e2e/testimages/grpchealth)
	//   /bin/localhttp-server    (e2e/testimages/localhttp)
	TestImage = Registry + "/probeshim/testbox:e2e"
)

const modulePath = "github.com/probeshim/probeshim"

// buildDirPrefix starts the names of the temporary folders of image builds
// (then the rig's name); Teardown removes those an interrupted build left.
const buildDirPrefix = "probeshim-images-"

// Image describes an image to build and push to the rig's registry.
type Image struct {
	// Ref is name:tag under Registry (127.0.0.1:5000/probeshim/x:e2e), or a docker.io name
	// (busybox:1.36), which the registry serves as containerd's mirror of docker.io.
	Ref string
	// Busybox adds the static busybox and its applets.
	Busybox bool
	// GoPrograms maps a path in the image to a Go main package of this
	// module, built static (CGO_ENABLED=0), e.g.
	// "/bin/probeshim-cluster": "github.com/probeshim/probeshim/cluster/cmd/probeshim-cluster".
	GoPrograms map[string]string
	// Entries are further files (see image.Entry).
	Entries    []image.Entry
	Entrypoint []string
	Cmd        []string
	// User is the config's user ("1002", "www-data", "1003:1003").
	User string
	// Index, when set, builds the image instead (the fields above are unused): the index the
	// release builds, e.g. probeshim-cluster's from internal/build/ociimage. dir is for its files.
	Index func(ctx context.Context, dir string) (v1.ImageIndex, error)
}

// DefaultImages are PauseImage and TestImage.
func DefaultImages() []Image {
	return []Image{
		{
			Ref:        PauseImage,
			GoPrograms: map[string]string{"/pause": modulePath + "/e2e/testimages/pause"},
			Entrypoint: []string{"/pause"},
		},
		{
			Ref:     TestImage,
			Busybox: true,
			GoPrograms: map[string]string{
				"/bin/grpc-health-server": modulePath + "/e2e/testimages/grpchealth",
				"/bin/localhttp-server":   modulePath + "/e2e/testimages/localhttp",
			},
			Cmd: []string{"sh"},
		},
	}
}

// ImportImage builds img, pushes it to the rig's registry and has every node's containerd pull it
// (through CRI, by tag), so that pods and CRI calls find it at once.
func (r *Rig) ImportImage(ctx context.Context, img Image) error {
	if err := r.buildImages(ctx, []Image{img}, false); err != nil {
		return err
	}
	if err := r.pushImages(ctx, []Image{img}); err != nil {
		return err
	}
	_, err := r.PullImage(ctx, img.Ref)
	return err
}

// registryBin is where buildImages puts the registry's binary.
func (r *Rig) registryBin() string { return r.path("registry", "registry") }

func (r *Rig) imageTar(ref string) string { return r.path("images", fileSafe(ref)+".tar") }

// buildImages compiles every Go program of imgs (and the registry, with registry) in one
// `go build` and writes one docker-archive tar per image without an Index.
func (r *Rig) buildImages(ctx context.Context, imgs []Image, registry bool) error {
	// Build outside the rig's folder: a `go build` orphaned by a killed test
	// must not write into the next rig's folder.
	binDir, err := os.MkdirTemp("", buildDirPrefix+r.cfg.Name+"-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	pkgSet := map[string]bool{}
	if registry {
		pkgSet[registryPkg] = true
	}
	for _, img := range imgs {
		for _, pkg := range img.GoPrograms {
			pkgSet[pkg] = true
		}
	}
	var pkgs []string
	for p := range pkgSet {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	built := map[string]string{}
	if len(pkgs) > 0 {
		names := map[string]string{}
		for _, p := range pkgs {
			if other, dup := names[path.Base(p)]; dup {
				return fmt.Errorf("go programs %s and %s have the same name", other, p)
			}
			names[path.Base(p)] = p
			built[p] = filepath.Join(binDir, path.Base(p))
		}
		if err := goBuildStatic(ctx, binDir, pkgs...); err != nil {
			return err
		}
	}
	if registry {
		b, err := os.ReadFile(built[registryPkg])
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(r.registryBin()), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(r.registryBin(), b, 0o755); err != nil {
			return err
		}
	}
	var applets []string
	for _, img := range imgs {
		if img.Index != nil {
			continue
		}
		if img.Busybox && applets == nil {
			out, err := exec.CommandContext(ctx, "/bin/busybox", "--list-full").Output()
			if err != nil {
				return fmt.Errorf("busybox --list-full (is busybox-static installed?): %w", err)
			}
			applets = strings.Fields(string(out))
		}
		entries := image.BaseEntries()
		if img.Busybox {
			entries = append(entries, image.BusyboxEntries("/bin/busybox", applets)...)
		}
		for dst, pkg := range img.GoPrograms {
			entries = append(entries, image.Entry{Path: dst, Source: built[pkg], Mode: 0o755})
		}
		entries = append(entries, img.Entries...)
		spec := image.Spec{Ref: img.Ref, Entries: entries, Entrypoint: img.Entrypoint, Cmd: img.Cmd, User: img.User}
		if err := image.WriteFile(r.imageTar(img.Ref), spec); err != nil {
			return err
		}
	}
	return nil
}

// goBuildStatic builds static binaries of the given packages of this module
// into dir, from the module's root (found with `go env GOMOD` from the
// working directory, which is inside the module for tests and `go run`).
func goBuildStatic(ctx context.Context, dir string, pkgs ...string) error {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if root == "." || root == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return fmt.Errorf("building %v: not inside the %s module", pkgs, modulePath)
	}
	flags := []string{"build", "-trimpath", "-ldflags=-s -w"}
	key := append(append([]string{root, "CGO_ENABLED=0", "go"}, flags...), pkgs...)
	return buildstore.Build(ctx, key, dir, func(out string) error {
		cmd := exec.CommandContext(ctx, "go", append(append(flags, "-o", out+"/"), pkgs...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		// Dies with the rig's process, so that a kill -9 leaves no build running.
		cmd.SysProcAttr = diesWithRig()
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %v: %w\n%s", pkgs, err, log.String())
		}
		return nil
	})
}
