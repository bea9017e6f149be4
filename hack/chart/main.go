// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command chart packages the Helm chart charts/probeshim (`make chart`) into
// dist/probeshim-<version>.tgz: version and appVersion from git (packaging/version.sh, as the
// binaries, the packages and the image have it; see charts.ChartVersion), so the chart deploys
// the image `make image` builds from the same commit. Every file's time is the commit's
// (SOURCE_DATE_EPOCH overrides it): one commit, one package, byte for byte. It prints the path.
// With -push it then pushes that package as Helm's OCI artifact to <registry>/charts/probeshim:<version>
// (credentials: docker's config.json, as the image's push; the manifest dated the commit's time, so
// one commit pushes one digest) and prints the reference, then <repo>@<digest> (as hack/image -push).
//
//	go run ./hack/chart [-dist dist] [-push registry.example/probeshim [-insecure]]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/registry"

	"github.com/probeshim/probeshim/charts"
	"github.com/probeshim/probeshim/internal/build/ociimage"
)

func main() {
	dist := flag.String("dist", "dist", "output folder")
	push := flag.String("push", "", "push the package to <registry>/charts/probeshim:<version>, e.g. registry.example/probeshim")
	insecure := flag.Bool("insecure", false, "push over plain HTTP")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dist, *push, *insecure); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
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
	path, err := charts.Package(filepath.Join(root, "charts", "probeshim"), dist, g.Version, g.Created)
	if err != nil {
		return err
	}
	fmt.Println(path)
	if push == "" {
		return nil
	}
	opts := []registry.ClientOption{registry.ClientOptCredentialsFile(dockerConfig())}
	if insecure {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	ref, digest, err := charts.PushOCI(path, push, g.Created, opts...)
	if err != nil {
		return err
	}
	repo := ref[:strings.LastIndex(ref, ":")] // PushOCI's ref ends in :<version>
	fmt.Printf("pushed oci://%s\n%s@%s\n", ref, repo, digest)
	return nil
}

// dockerConfig is docker's config.json, where `docker login` and `crane auth login` keep the
// credentials the image's push uses too.
func dockerConfig() string {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".docker")
	}
	return filepath.Join(dir, "config.json")
}
