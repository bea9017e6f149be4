// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"

	"github.com/probeshim/probeshim/internal/build/debpkg"
)

// EnsurePackages installs the Debian packages the rig runs (the group "rig" of
// internal/build/debpkg/packages.txt: the container runtime, the CNI plugins, the busybox the
// test images are built from, and the tools it shells out to) when they are missing.
func EnsurePackages(ctx context.Context, logf func(string, ...any)) error {
	return debpkg.Ensure(ctx, logf, "rig")
}
