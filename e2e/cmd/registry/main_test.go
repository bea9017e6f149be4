// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/probeshim/probeshim/internal/build/ociimage"
	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// TestPushPull pushes a two-platform index as make image builds it and reads it back by tag and
// by digest, each platform's image too.
func TestPushPull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	reg, err := newRegistry(ctx, addr, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reg.ListenAndServe() }()
	t.Cleanup(func() { _ = reg.Shutdown(context.Background()) })

	dir := t.TempDir()
	spec := ociimage.Spec{Title: "x", Binary: "/bin/x", Binaries: map[ociimage.Platform]string{}, Version: "1.0.0", Created: time.Unix(0, 0)}
	for _, p := range ociimage.Platforms {
		f := filepath.Join(dir, p.Arch)
		if err := os.WriteFile(f, []byte(p.String()), 0o755); err != nil {
			t.Fatal(err)
		}
		spec.Binaries[p] = f
	}
	idx, err := ociimage.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	tag, err := name.NewTag(addr+"/probeshim/x:1.0.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	// The listener comes up in the background: retry the first push for a while.
	err = poll.Until(ctx, 20*time.Second, "the first push", func(ctx context.Context) (bool, string, error) {
		if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx)); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	byTag, err := remote.Index(tag, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := byTag.Digest(); got != want {
		t.Errorf("by tag: digest %s, want %s", got, want)
	}
	byDigest, err := remote.Index(tag.Context().Digest(want.String()), remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	im, err := byDigest.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("%d manifests, want 2", len(im.Manifests))
	}
	for _, d := range im.Manifests {
		img, err := remote.Image(tag.Context().Digest(d.Digest.String()), remote.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config says %s", d.Platform.Architecture, cf.Architecture)
		}
	}
}
