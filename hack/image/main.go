// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command image builds the probeshim-cluster image (`make image`) and pushes it (`make
// image-push`). Build: the OCI image index for linux/amd64 and linux/arm64 as an OCI layout in
// dist/image/probeshim-cluster and as one tar, dist/probeshim-cluster-<tag>.oci.tar. Push: the
// same index to IMAGE:<tag>. It prints the tag and the index's digest.
//
//	go run ./hack/image [-dist dist] [-push registry.example/probeshim/probeshim-cluster] [-insecure]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/probeshim/probeshim/internal/build/ociimage"
)

func main() {
	dist := flag.String("dist", "dist", "output folder")
	push := flag.String("push", "", "push the index to this repository (tag: the version), e.g. registry.example/probeshim/probeshim-cluster")
	insecure := flag.Bool("insecure", false, "push over plain HTTP")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dist, *push, *insecure); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dist, push string, insecure bool) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	g, err := ociimage.FromGit(ctx, root)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "probeshim-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	spec, err := ociimage.ClusterSpec(ctx, root, tmp, g, ociimage.Platforms)
	if err != nil {
		return err
	}
	idx, err := ociimage.Build(spec)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	tag := ociimage.Tag(g.Version)
	if push != "" {
		var opts []name.Option
		if insecure {
			opts = append(opts, name.Insecure)
		}
		ref, err := name.NewTag(push+":"+tag, opts...)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		fmt.Printf("pushed %s\n%s@%s\n", ref, ref.Context(), digest)
		return nil
	}
	layoutDir := filepath.Join(dist, "image", ociimage.ClusterTitle)
	if err := ociimage.WriteLayout(layoutDir, idx, tag); err != nil {
		return err
	}
	tarPath := filepath.Join(dist, ociimage.ClusterTitle+"-"+tag+".oci.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		return err
	}
	if err := ociimage.TarLayout(f, layoutDir, g.Created); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("%s (OCI layout), %s\n%s:%s %s\n", layoutDir, tarPath, ociimage.ClusterTitle, tag, digest)
	return nil
}
