// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

//go:build tools

// Package runc pins the runc sources the test rig builds its OCI runtime from
// (both rows), linked against Debian's libseccomp through cgo.
package runc

import (
	_ "github.com/opencontainers/runc"
)
