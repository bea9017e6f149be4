// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

//go:build tools

// Package critest pins the CRI validation suite (critest, from
// sigs.k8s.io/cri-tools) and the ginkgo CLI it runs its parallel nodes with.
// It lives in a module of its own so that the project's go.mod never
// requires cri-tools and its test dependencies.
package critest

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "github.com/onsi/gomega"
	_ "sigs.k8s.io/cri-tools/pkg/benchmark"
	_ "sigs.k8s.io/cri-tools/pkg/common"
	_ "sigs.k8s.io/cri-tools/pkg/framework"
	_ "sigs.k8s.io/cri-tools/pkg/validate"
	_ "sigs.k8s.io/cri-tools/pkg/version"
)
