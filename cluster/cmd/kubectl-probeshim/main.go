// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command kubectl-probeshim is the kubectl plugin `kubectl probeshim` (cluster/plugin/cli): on PATH,
// kubectl runs it for `kubectl probeshim ...`.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/probeshim/probeshim/cluster/plugin/cli"
	buildversion "github.com/probeshim/probeshim/internal/version"
)

// version is set at build time (-ldflags "-X main.version=..."; make release does).
var version = "dev"

func main() {
	cmd := cli.NewCommand(&cli.Options{IOStreams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		Version: buildversion.String(version)})
	if err := cmd.Execute(); err != nil {
		os.Exit(1) // cobra has printed the error
	}
}
