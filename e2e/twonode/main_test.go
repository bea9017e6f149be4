// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package twonode is the end-to-end suite on a rig of two nodes: the rig itself, then the cluster
// deployment with a node service on each node under that node's own identity — what each node
// sees and may write, a node deleted and registered again, a workload failing on both nodes, and
// a node service made silent.
package twonode

import (
	"flag"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
)

func TestMain(m *testing.M) {
	// The scenarios wait on probes, controllers and kubelets, hardly on the CPU. -parallel on the
	// command line wins.
	_ = flag.Set("test.parallel", "8")
	logf.SetLogger(logr.Discard())
	framework.Main(m, framework.WithNodes(2), framework.WithScheme(v1alpha1.AddToScheme), framework.WithImages(cluster.Image()))
}
