// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command chart packages the Helm chart charts/probeshim (`make chart`) into
// dist/probeshim-<version>.tgz: version and appVersion from git (packaging/version.sh, as the
// binaries, the packages and the image have it; see charts.ChartVersion), so the chart deploys
// the image `make image` builds from the same commit. Every file's time is the commit's
// (SOURCE_DATE_EPOCH overrides it): one commit, one package, byte for byte. It prints the path.
//
//	go run ./hack/chart [-dist dist]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/probeshim/probeshim/charts"
	"github.com/probeshim/probeshim/internal/build/ociimage"
)

func main() {
	dist := flag.String("dist", "dist", "output folder")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := os.Getwd()
	if err == nil {
		var g ociimage.Git
		if g, err = ociimage.FromGit(ctx, root); err == nil {
			var path string
			if path, err = charts.Package(filepath.Join(root, "charts", "probeshim"), *dist, g.Version, g.Created); err == nil {
				fmt.Println(path)
				return
			}
		}
	}
	fmt.Fprintln(os.Stderr, "chart:", err)
	os.Exit(1)
}
