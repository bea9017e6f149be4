// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerdSocket is the rig's containerd socket (CRI and containerd API;
// containerd namespace rig.ContainerdNamespace). NetNSPath is the rig's
// network namespace; PodNetNSDir is where the pods' network namespaces are
// mounted.
func (c *Cluster) ContainerdSocket() string { return c.Rig.ContainerdSocket() }
func (c *Cluster) NetNSPath() string        { return c.Rig.NetNSPath() }
func (c *Cluster) PodNetNSDir() string      { return c.Rig.PodNetNSDir() }

// CRI dials the rig's containerd CRI service. Close the connection when done.
func (c *Cluster) CRI() (runtimeapi.RuntimeServiceClient, *grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+c.ContainerdSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return runtimeapi.NewRuntimeServiceClient(conn), conn, nil
}

// Sandbox is a pod's sandbox as the runtime sees it.
type Sandbox struct {
	ID string
	// NetNSPath is the file of the pod's network namespace.
	NetNSPath string
	State     runtimeapi.PodSandboxState
}

// PodSandboxes returns the pod's sandboxes (newest first) from the CRI, with
// the network namespace path from containerd's verbose status.
func (c *Cluster) PodSandboxes(ctx context.Context, pod *corev1.Pod) ([]Sandbox, error) {
	rs, conn, err := c.CRI()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)},
	}})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	var out []Sandbox
	for _, sb := range list.Items {
		st, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id, Verbose: true})
		if err != nil {
			return nil, fmt.Errorf("PodSandboxStatus %s: %w", sb.Id, err)
		}
		out = append(out, Sandbox{ID: sb.Id, State: sb.State, NetNSPath: netnsFromInfo(st.Info["info"])})
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && list.Items[j].CreatedAt > list.Items[j-1].CreatedAt; j-- {
			out[j], out[j-1] = out[j-1], out[j]
			list.Items[j], list.Items[j-1] = list.Items[j-1], list.Items[j]
		}
	}
	return out, nil
}

// netnsFromInfo digs the network namespace path out of containerd's verbose
// sandbox info (runtimeSpec.linux.namespaces).
func netnsFromInfo(info string) string {
	var v struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if json.Unmarshal([]byte(info), &v) != nil {
		return ""
	}
	for _, ns := range v.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path
		}
	}
	return ""
}
