// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package twonode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

// The rig itself: two Ready nodes under their own identities, each running its pods from its own
// containerd and address block, and pods of the two nodes reaching each other over the bridge.
func TestRigNodes(t *testing.T) {
	c := framework.Get(t)
	nodes := c.Nodes()
	if len(nodes) != 2 {
		t.Fatalf("the rig has %d nodes, want 2", len(nodes))
	}
	ns := c.Namespace(t)
	ctx := framework.Context(t, 3*time.Minute)
	pods := map[string]*corev1.Pod{}
	for _, n := range nodes {
		node, err := c.Kube.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip := internalIP(node); ip != n.IP() {
			t.Errorf("node %s: InternalIP %q, want %q", n.Name(), ip, n.IP())
		}
		web := framework.Shell("web", "mkdir -p /tmp/www; echo "+n.Name()+" > /tmp/www/index.html; exec httpd -f -p 8080 -h /tmp/www")
		pods[n.Name()] = c.CreatePod(t, onNode(framework.NewPod(ns, "web-"+n.Name(), web), n.Name()))
	}
	for _, n := range nodes {
		p := c.WaitForPodReady(t, pods[n.Name()], 2*time.Minute)
		pods[n.Name()] = p
		if p.Spec.NodeName != n.Name() {
			t.Errorf("pod %s runs on %q, want %s", p.Name, p.Spec.NodeName, n.Name())
		}
		// The node's own containerd runs it, and nobody else's does.
		for _, other := range nodes {
			ids, err := sandboxes(ctx, other, p)
			if err != nil {
				t.Fatal(err)
			}
			if want := other == n; (len(ids) > 0) != want {
				t.Errorf("containerd of %s has sandboxes %v of pod %s (on %s)", other.Name(), ids, p.Name, n.Name())
			}
		}
		_, pods4, _ := net.ParseCIDR(rig.PodCIDR)
		if ip := net.ParseIP(p.Status.PodIP); ip == nil || !pods4.Contains(ip) {
			t.Errorf("pod %s has IP %q, outside %s", p.Name, p.Status.PodIP, rig.PodCIDR)
		}
	}
	a, b := pods[nodes[0].Name()], pods[nodes[1].Name()]
	if a.Status.PodIP == b.Status.PodIP {
		t.Fatalf("the pods of both nodes have IP %s", a.Status.PodIP)
	}
	// Across nodes, both ways; exec and logs go through each node's kubelet.
	for _, pair := range [][2]*corev1.Pod{{a, b}, {b, a}} {
		from, to := pair[0], pair[1]
		out, stderr, err := c.Exec(ctx, ns, from.Name, "web", "sh", "-c", fmt.Sprintf("wget -qO- http://%s:8080/index.html", to.Status.PodIP))
		if err != nil {
			t.Fatalf("wget from %s to %s: %v %s", from.Name, to.Name, err, stderr)
		}
		if got := strings.TrimSpace(out); got != to.Spec.NodeName {
			t.Errorf("%s got %q from %s, want %q", from.Name, got, to.Name, to.Spec.NodeName)
		}
	}
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// onNode binds the pod to the node (no scheduler involved).
func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeName = node
	return p
}

// sandboxes lists the sandbox IDs the node's containerd has for the pod.
func sandboxes(ctx context.Context, n *rig.Node, p *corev1.Pod) ([]string, error) {
	rs, conn, err := framework.CRIOn(n)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)},
	}})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, sb := range list.Items {
		ids = append(ids, sb.Id)
	}
	return ids, nil
}
