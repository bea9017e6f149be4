// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package cosign signs the release's image and chart in their registry, and verifies such
// signatures, with sigstore's cosign itself (hack/cosign.sh builds it): a key pair of cosign's,
// the signature stored beside the artifact as cosign stores it (<repo>:sha256-<hex>.sig), and no
// transparency log: the release's own key vouches, as its OpenPGP key does for the packages. Writing
// cosign's signature format by hand is what this avoids.
package cosign

import (
	"context"
	"os"
	"path/filepath"

	"github.com/probeshim/probeshim/internal/build/command"
)

// BinaryEnv names a cosign binary to use instead of hack/cosign.sh's.
const BinaryEnv = "PROBESHIM_COSIGN"

// Binary is $PROBESHIM_COSIGN, else what hack/cosign.sh in root builds (once) and prints.
func Binary(ctx context.Context, root string) (string, error) {
	if b := os.Getenv(BinaryEnv); b != "" {
		return b, nil
	}
	return command.Output(ctx, root, nil, filepath.Join(root, "hack", "cosign.sh"))
}

// Tool runs cosign.
type Tool struct {
	Bin string
	// Wrap comes before the command, e.g. nsenter --net=<path> to reach a registry in a netns.
	Wrap []string
	// PlainHTTP reaches the registry over HTTP (a test registry on loopback).
	PlainHTTP bool
	// Password is the private key's (COSIGN_PASSWORD); "" for an unencrypted test key.
	Password string
}

func (t Tool) run(ctx context.Context, dir string, args ...string) (string, error) {
	argv := append(append(append([]string{}, t.Wrap...), t.Bin), args...)
	return command.Output(ctx, dir, append(os.Environ(), "COSIGN_PASSWORD="+t.Password), argv...)
}

func (t Tool) registryFlags() []string {
	if t.PlainHTTP {
		return []string{"--allow-http-registry"}
	}
	return nil
}

// GenerateKeyPair writes cosign.key and cosign.pub into dir (a throwaway pair for tests).
func (t Tool) GenerateKeyPair(ctx context.Context, dir string) (key, pub string, err error) {
	if _, err := t.run(ctx, dir, "generate-key-pair"); err != nil {
		return "", "", err
	}
	return filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub"), nil
}

// Sign signs ref, which names a digest (<repo>@sha256:…), with key and stores the signature in
// ref's repository. Nothing is uploaded to a transparency log.
func (t Tool) Sign(ctx context.Context, key, ref string) error {
	args := append([]string{"sign", "--key", key, "--tlog-upload=false", "--yes"}, t.registryFlags()...)
	_, err := t.run(ctx, "", append(args, ref)...)
	return err
}

// Verify checks that ref carries a signature by pub's key and returns cosign's report. Without a
// transparency log entry to check, as Sign makes them.
func (t Tool) Verify(ctx context.Context, pub, ref string) (string, error) {
	args := append([]string{"verify", "--key", pub, "--insecure-ignore-tlog=true"}, t.registryFlags()...)
	return t.run(ctx, "", append(args, ref)...)
}

// PublicKey is the PEM public key of key, as users verify with it.
func (t Tool) PublicKey(ctx context.Context, key string) (string, error) {
	return t.run(ctx, "", "public-key", "--key", key)
}
