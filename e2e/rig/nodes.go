// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
)

// MaxNodes is the most nodes one rig runs (Config.Nodes): the pod range is
// split into MaxNodes blocks, one per node.
const MaxNodes = 4

// Node is one node of the rig: a kubelet and a containerd of its own (own
// socket, root, state and runc root), an address of its own on NodeLink, a
// block of PodCIDR for its pods and a cgroup for them. All nodes share the
// rig's netns, bridge (Bridge) and control plane: a pod on one node reaches
// a pod on another over the bridge, as on one L2 segment. The first node
// keeps the layout of a one-node rig (its files directly in the rig's
// folder); the others live in nodes/<name> under it.
type Node struct {
	r     *Rig
	index int
	name  string
	ip    string
	dir   string
	// kubeletCRI is the CRI socket the kubelet uses when it is not
	// containerd's own (SwitchKubeletCRI).
	kubeletCRI string
}

func (r *Rig) newNodes() {
	r.nodes = nil
	for i := 0; i < r.cfg.Nodes; i++ {
		n := &Node{r: r, index: i, name: nodeName(r.cfg.NodeName, i), ip: nodeIP(i), dir: r.dir}
		if i > 0 {
			n.dir = filepath.Join(r.dir, "nodes", n.name)
		}
		r.nodes = append(r.nodes, n)
	}
}

// nodeName names node i: the first is base, the others base-b, base-c, ...
func nodeName(base string, i int) string {
	if i == 0 {
		return base
	}
	return fmt.Sprintf("%s-%c", base, 'a'+i)
}

// nodeIP is node i's InternalIP: NodeIP for the first, the next addresses of
// the node network for the others.
func nodeIP(i int) string {
	ip := net.ParseIP(NodeIP).To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+byte(i)).String()
}

// Nodes are the rig's nodes, the first (NodeName) first.
func (r *Rig) Nodes() []*Node { return append([]*Node(nil), r.nodes...) }

// Node returns the node of that name, or nil.
func (r *Rig) Node(name string) *Node {
	for _, n := range r.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// Name is the node's name (its Node object, the kubelet's identity
// system:node:<name>).
func (n *Node) Name() string { return n.name }

// IP is the node's InternalIP, inside the rig's netns.
func (n *Node) IP() string { return n.ip }

func (n *Node) path(elem ...string) string {
	return filepath.Join(append([]string{n.dir}, elem...)...)
}

// ContainerdSocket is the node's containerd gRPC socket (CRI and the
// containerd API, namespace ContainerdNamespace), a unix socket on the host.
func (n *Node) ContainerdSocket() string { return n.path("containerd", "containerd.sock") }

// ContainerdRoot and ContainerdState are the node's containerd --root and --state.
func (n *Node) ContainerdRoot() string  { return n.path("containerd", "root") }
func (n *Node) ContainerdState() string { return n.path("containerd", "state") }

// PodNetNSDir is where the node's containerd mounts its pods' network namespaces.
func (n *Node) PodNetNSDir() string {
	return filepath.Join(n.ContainerdState(), "io.containerd.grpc.v1.cri", "netns")
}

// KubeletRootDir is the node's kubelet --root-dir.
func (n *Node) KubeletRootDir() string { return n.path("kubelet") }

// KubeletKubeconfig is the node kubelet's kubeconfig (system:node:<name>,
// group system:nodes), for use inside the netns.
func (n *Node) KubeletKubeconfig() string { return n.path("kubelet.kubeconfig") }

// KubeletCRISocket is the socket the node's kubelet uses as its runtime:
// containerd's, unless SwitchKubeletCRI pointed it elsewhere.
func (n *Node) KubeletCRISocket() string {
	if n.kubeletCRI != "" {
		return n.kubeletCRI
	}
	return n.ContainerdSocket()
}

// Component is the name of the node's kubelet or containerd as the rig's
// process (StopComponent, logs/<name>.log): "kubelet" and "containerd" for
// the first node, "kubelet-<node>" and "containerd-<node>" for the others.
func (n *Node) Component(kind string) string {
	if n.index == 0 {
		return kind
	}
	return kind + "-" + n.name
}

// nodeOfComponent returns the node whose kubelet or containerd name is.
func (r *Rig) nodeOfComponent(name string) *Node {
	for _, n := range r.nodes {
		if name == n.Component("kubelet") || name == n.Component("containerd") {
			return n
		}
	}
	return nil
}

// isKubelet reports whether a process of the rig is a kubelet (of any node).
func isKubelet(name string) bool { return name == "kubelet" || strings.HasPrefix(name, "kubelet-") }

// podsCgroup is the child of the rig's cgroup that is the node kubelet's cgroupRoot.
func (n *Node) podsCgroup() string {
	if n.index == 0 {
		return podsCgroup
	}
	return podsCgroup + "-" + n.name
}

// healthzPort is the node kubelet's healthz port on 127.0.0.1 (the kubelets
// share the netns's loopback; their serving port is on their own address).
func (n *Node) healthzPort() int {
	if n.index == 0 {
		return 10248
	}
	return 10260 + n.index
}

// ipamRange is the node's block of PodCIDR for the host-local plugin
// (rangeStart, rangeEnd), or "" for a one-node rig, whose node has all of it.
func (n *Node) ipamRange() (start, end string) {
	if len(n.r.nodes) == 1 {
		return "", ""
	}
	_, pods, _ := net.ParseCIDR(PodCIDR)
	base := pods.IP.To4()
	block := 16 / MaxNodes // /20 = 16 /24s
	first := int(base[2]) + n.index*block
	start = net.IPv4(base[0], base[1], byte(first), 1).String()
	if n.index == 0 {
		start = net.IPv4(base[0], base[1], byte(first), 2).String() // .1 is PodGateway
	}
	return start, net.IPv4(base[0], base[1], byte(first+block-1), 254).String()
}
