// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

//go:build tools

// Package v1 pins the containerd 1.7 sources the test rig builds its runtime
// from (row 2 of the matrix). A module of its own: 1.7's dependencies do not
// mix with 2.x's.
package v1

import (
	_ "github.com/containerd/containerd/cmd/containerd"
	_ "github.com/containerd/containerd/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/cmd/ctr"
)
