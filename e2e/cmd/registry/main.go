// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command registry is the rig's image registry: the CNCF Distribution registry (the one behind
// most registries, as a library) with its filesystem storage, plain HTTP on a loopback address of
// the rig's netns. The rig pushes the images it runs there and containerd pulls them like a node
// of a real cluster.
//
//	registry -addr 127.0.0.1:5000 -root DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "listen address")
	root := flag.String("root", "", "folder of the registry's storage")
	flag.Parse()
	if *root == "" {
		fmt.Fprintln(os.Stderr, "registry: -root is required")
		os.Exit(2)
	}
	if err := run(*addr, *root); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(addr, root string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg, err := newRegistry(ctx, addr, root)
	if err != nil {
		return err
	}
	return reg.ListenAndServe()
}

func newRegistry(ctx context.Context, addr, root string) (*registry.Registry, error) {
	// Parsed from YAML like the registry's own config file, so that defaults apply as they do there.
	cfg, err := configuration.Parse(strings.NewReader(fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
`, root, addr)))
	if err != nil {
		return nil, err
	}
	return registry.NewRegistry(ctx, cfg)
}
