// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/e2e/rig"
)

// WithNodes makes Main bring up a rig of n nodes (rig.Config.Nodes): a
// kubelet and a containerd of their own each, one control plane. Suites that
// do not ask get one node.
func WithNodes(n int) Option {
	return func(o *options) { o.rig.Nodes = n }
}

// Nodes are the rig's nodes, the first (Rig.NodeName) first.
func (c *Cluster) Nodes() []*rig.Node { return c.Rig.Nodes() }

// NodeServiceUser is the identity the node service of node runs as by
// default: the kubelet's, system:node:<node> in group system:nodes.
func NodeServiceUser(node string) (user string, groups []string) {
	return "system:node:" + node, []string{"system:nodes"}
}

// DedicatedNodeUser is the dedicated identity of node's service, as
// cluster/deploy's --node-user-prefix and --node-group name it:
// probeshim:node:<node> in group probeshim:nodes.
func DedicatedNodeUser(node string) (user string, groups []string) {
	return "probeshim:node:" + node, []string{"probeshim:nodes"}
}

// StartNodeServiceOn starts the node service for node n of the rig (its
// name, its containerd) like StartNodeService does for the first node, with
// the kubeconfig given, or the node's own identity (NodeServiceUser) when
// kubeconfig is "". It is stopped when the test ends (resumed first if
// paused). Several may run at once: each has its own health address and
// status socket.
func (c *Cluster) StartNodeServiceOn(t testing.TB, n *rig.Node, kubeconfig string, extra ...string) *NodeService {
	t.Helper()
	if kubeconfig == "" {
		var err error
		if kubeconfig, err = c.nodeKubeconfig(n.Name()); err != nil {
			t.Fatal(err)
		}
	}
	port, err := c.freeRigPort()
	if err != nil {
		t.Fatal(err)
	}
	return c.launchNodeService(t, n.Name(), kubeconfig, n.ContainerdSocket(), fmt.Sprintf("127.0.0.1:%d", port), extra)
}

// nodeKubeconfig is a kubeconfig of node's own identity (NodeServiceUser).
func (c *Cluster) nodeKubeconfig(node string) (string, error) {
	user, groups := NodeServiceUser(node)
	return c.Rig.Kubeconfig(user, groups...)
}

// CRIOn dials the CRI service of node n's containerd. Close the connection when done.
func CRIOn(n *rig.Node) (runtimeapi.RuntimeServiceClient, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+n.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return runtimeapi.NewRuntimeServiceClient(conn), conn, nil
}

// freeRigPort returns a TCP port free on the loopback of the rig's netns
// (where every node service of the rig listens) at the time of the call.
func (c *Cluster) freeRigPort() (int, error) { return rig.FreeLoopbackPort(c.NetNSPath()) }

// WaitForServed waits until the cluster part labels each node as served by a live node service
// (v1alpha1.LabelNodeServed): pods opted in to enhanced liveness are scheduled only there.
func (c *Cluster) WaitForServed(t testing.TB, nodes ...string) {
	t.Helper()
	for _, node := range nodes {
		err := WaitFor(Context(t, 2*time.Minute), time.Minute, "node "+node+" labelled "+v1alpha1.LabelNodeServed,
			func(ctx context.Context) (bool, string, error) {
				n, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					return false, err.Error(), nil
				}
				return n.Labels[v1alpha1.LabelNodeServed] == "true", fmt.Sprintf("labels %v", n.Labels), nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
}
