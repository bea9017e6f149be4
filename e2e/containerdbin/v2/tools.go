// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

//go:build tools

// Package v2 pins the containerd 2.x sources the test rig builds its runtime
// from (row 1 of the matrix). A module of its own, so the project's go.mod
// never requires the daemon's dependencies.
package v2

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
