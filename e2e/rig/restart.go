// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StopComponent stops one running component (e.g. "containerd",
// "kube-apiserver") with SIGTERM, for tests of how others cope without it.
func (r *Rig) StopComponent(name string) error {
	p := r.proc(name)
	if p == nil {
		return fmt.Errorf("rig: no running component %q", name)
	}
	p.stopGracefully(15 * time.Second)
	r.procs = slices.DeleteFunc(r.procs, func(q *process) bool { return q == p })
	return nil
}

// StartComponent starts a component stopped by StopComponent again, with the
// same command line, and waits until it serves. After the API server it also
// restarts the controller-manager and the scheduler: while the API server
// was away (and in its first seconds back, when RBAC still denies) their
// informers backed off, up to a minute each, so a namespace's ServiceAccount
// or a pod's binding could lag that long behind a test's next step.
func (r *Rig) StartComponent(ctx context.Context, name string) error {
	if err := r.startComponent(ctx, name); err != nil || name != "kube-apiserver" {
		return err
	}
	for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
		if r.proc(c) == nil {
			continue
		}
		if err := r.RestartComponent(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func (r *Rig) startComponent(ctx context.Context, name string) error {
	if r.proc(name) != nil {
		return fmt.Errorf("rig: %s is already running", name)
	}
	var argv []string
	for _, p := range r.state.Processes {
		if p.Name == name && p.argv != nil {
			argv = p.argv
		}
	}
	if argv == nil {
		return fmt.Errorf("rig: %s was never started", name)
	}
	p, err := r.startProcess(name, argv...)
	if err != nil {
		return err
	}
	return r.waitFor(ctx, p, name+" serving", 60*time.Second, func() (bool, error) {
		n := r.nodeOfComponent(name)
		switch {
		case name == "kube-apiserver":
			return r.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error() == nil, nil
		case n != nil && name == n.Component("containerd"):
			return n.criReady(ctx), nil
		case n != nil && name == n.Component("kubelet"):
			return r.nsGetOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", n.healthzPort())), nil
		default:
			return true, nil
		}
	})
}

// RestartComponent stops and starts a component.
func (r *Rig) RestartComponent(ctx context.Context, name string) error {
	if err := r.StopComponent(name); err != nil {
		return err
	}
	return r.StartComponent(ctx, name)
}

// criReady reports whether containerd's CRI service answers and says the
// runtime is ready: after a restart it serves its API before CRI is up.
func (n *Node) criReady(ctx context.Context) bool {
	conn, err := grpc.NewClient("unix://"+n.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return false
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := runtimeapi.NewRuntimeServiceClient(conn).Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return false
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady {
			return c.GetStatus()
		}
	}
	return false
}

// KubeletCRISocket is the unix socket the first node kubelet's
// containerRuntimeEndpoint and imageServiceEndpoint name: containerd's,
// unless SwitchKubeletCRI pointed them elsewhere.
func (r *Rig) KubeletCRISocket() string { return r.nodes[0].KubeletCRISocket() }

// SwitchKubeletCRI points the first node kubelet's containerRuntimeEndpoint and
// imageServiceEndpoint at socket ("" for containerd's own) and restarts it,
// which is how an operator moves a node onto a CRI proxy and back: edit the
// kubelet config, restart the kubelet. Pods keep running (containerd owns
// them). It returns once the kubelet is healthy and has reported the node
// Ready after the restart, so the node's status comes from the new endpoint.
func (r *Rig) SwitchKubeletCRI(ctx context.Context, socket string) error {
	n := r.nodes[0]
	if socket == n.ContainerdSocket() {
		socket = ""
	}
	n.kubeletCRI = socket
	if err := os.WriteFile(n.path("kubelet.yaml"), []byte(n.kubeletConfig()), 0o644); err != nil {
		return err
	}
	if err := r.StopComponent(n.Component("kubelet")); err != nil {
		return err
	}
	restarted := time.Now() // the old kubelet is gone: later heartbeats are the new one's
	if err := r.StartComponent(ctx, n.Component("kubelet")); err != nil {
		return err
	}
	return r.waitNodeReadySince(ctx, n, restarted)
}

// waitNodeReadySince waits until the node reports Ready with a heartbeat
// after since, i.e. from a kubelet started after it.
func (r *Rig) waitNodeReadySince(ctx context.Context, n *Node, since time.Time) error {
	return r.waitFor(ctx, r.proc(n.Component("kubelet")), "node "+n.name+" Ready after the kubelet restart", 90*time.Second, func() (bool, error) {
		node, err := r.client.CoreV1().Nodes().Get(ctx, n.name, metav1GetOptions)
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			// Heartbeats have a resolution of a second: one stamped after
			// the restart's second came from the new kubelet.
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.After(since.Truncate(time.Second)), nil
			}
		}
		return false, nil
	})
}

// RestartKubelet restarts the node's kubelet and returns once it has
// reported the node Ready again. A kubelet registers its Node object only
// when it starts: after the Node was deleted, this is how it comes back.
func (r *Rig) RestartKubelet(ctx context.Context, n *Node) error {
	if err := r.StopComponent(n.Component("kubelet")); err != nil {
		return err
	}
	restarted := time.Now()
	if err := r.StartComponent(ctx, n.Component("kubelet")); err != nil {
		return err
	}
	return r.waitNodeReadySince(ctx, n, restarted)
}
