// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package kubetest serves kube.Interface from a client-go clientset, e.g. a fake one in tests.
// For tests only: importing it links client-go's whole clientset, which the node service avoids.
package kubetest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/probeshim/probeshim/shim/kube"
)

// Adapt returns c's core and coordination clients as a kube.Interface.
func Adapt(c kubernetes.Interface) kube.Interface { return clientset{c} }

type clientset struct{ c kubernetes.Interface }

func (a clientset) Nodes() kube.Getter[*corev1.Node] { return a.c.CoreV1().Nodes() }
func (a clientset) ConfigMaps(ns string) kube.Getter[*corev1.ConfigMap] {
	return a.c.CoreV1().ConfigMaps(ns)
}
func (a clientset) Services(ns string) kube.Getter[*corev1.Service] {
	return a.c.CoreV1().Services(ns)
}
func (a clientset) Pods(ns string) kube.PodClient     { return a.c.CoreV1().Pods(ns) }
func (a clientset) Leases(ns string) kube.LeaseClient { return a.c.CoordinationV1().Leases(ns) }
func (a clientset) Events(ns string) kube.EventClient { return a.c.CoreV1().Events(ns) }
