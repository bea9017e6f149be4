// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

//go:build tools

// Package kubebin135 pins the Kubernetes 1.35 and etcd sources the test rig builds its
// binaries from. It lives in a module of its own so that the project's go.mod
// never requires k8s.io/kubernetes.
package kubebin135

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubectl/pkg/cmd"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
