// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
)

// The nodes of a rig get distinct names, addresses, folders, cgroups, ports and process names,
// and pod address blocks that do not overlap, inside PodCIDR and clear of its gateway.
func TestNodesApart(t *testing.T) {
	r := &Rig{cfg: Config{Nodes: MaxNodes}.withDefaults()}
	r.dir = r.cfg.Dir
	r.newNodes()
	seen := map[string]string{}
	unique := func(what, v, node string) {
		t.Helper()
		if other, dup := seen[what+v]; dup {
			t.Errorf("%s %q of node %s is node %s's too", what, v, node, other)
		}
		seen[what+v] = node
	}
	_, pods, _ := net.ParseCIDR(PodCIDR)
	var blocks [][2]net.IP
	for i, n := range r.Nodes() {
		if i == 0 && (n.Name() != r.cfg.NodeName || n.IP() != NodeIP || n.ContainerdSocket() != r.path("containerd", "containerd.sock")) {
			t.Errorf("the first node is %s %s %s, want a one-node rig's layout", n.Name(), n.IP(), n.ContainerdSocket())
		}
		for what, v := range map[string]string{
			"name": n.Name(), "ip": n.IP(), "socket": n.ContainerdSocket(), "kubelet root": n.KubeletRootDir(),
			"kubeconfig": n.KubeletKubeconfig(), "cgroup": n.podsCgroup(), "kubelet": n.Component("kubelet"),
			"containerd": n.Component("containerd"), "healthz": fmt.Sprint(n.healthzPort()), "cert": n.servingCertName(),
		} {
			unique(what, v, n.Name())
		}
		if !isKubelet(n.Component("kubelet")) || isKubelet(n.Component("containerd")) {
			t.Errorf("node %s: isKubelet does not tell its kubelet (%s) from its containerd", n.Name(), n.Component("kubelet"))
		}
		if got := r.nodeOfComponent(n.Component("containerd")); got != n {
			t.Errorf("nodeOfComponent(%s) = %v, want node %s", n.Component("containerd"), got, n.Name())
		}
		if len(n.ContainerdSocket()+".ttrpc") >= 108 {
			t.Errorf("node %s: socket path %s too long for a unix socket", n.Name(), n.ContainerdSocket())
		}
		start, end := n.ipamRange()
		a, b := net.ParseIP(start).To4(), net.ParseIP(end).To4()
		if a == nil || b == nil || !pods.Contains(a) || !pods.Contains(b) || string(a) > string(b) || start == PodGateway {
			t.Errorf("node %s: pod block %s-%s not inside %s, or holding the gateway", n.Name(), start, end, PodCIDR)
		}
		for _, o := range blocks {
			if !(string(b) < string(o[0]) || string(a) > string(o[1])) {
				t.Errorf("node %s: pod block %s-%s overlaps %s-%s", n.Name(), start, end, o[0], o[1])
			}
		}
		blocks = append(blocks, [2]net.IP{a, b})
		if cfg := n.cniConfig(); !strings.Contains(cfg, `"rangeStart": "`+start+`"`) || !strings.Contains(cfg, n.path("cni", "ipam")) {
			t.Errorf("node %s: CNI config without its block or own IPAM folder:\n%s", n.Name(), cfg)
		}
	}

	// One node keeps the whole range, as before there were several.
	one := &Rig{cfg: Config{}.withDefaults()}
	one.dir = one.cfg.Dir
	one.newNodes()
	if len(one.Nodes()) != 1 {
		t.Fatalf("default config: %d nodes, want 1", len(one.Nodes()))
	}
	if start, _ := one.Nodes()[0].ipamRange(); start != "" || strings.Contains(one.Nodes()[0].cniConfig(), "rangeStart") {
		t.Errorf("a one-node rig's node has a pod block %q; want all of %s", start, PodCIDR)
	}
}

func TestStartRefusesTooManyNodes(t *testing.T) {
	if _, err := Start(context.Background(), Config{Nodes: MaxNodes + 1}); err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Errorf("Start with %d nodes: %v, want a refusal", MaxNodes+1, err)
	}
}
