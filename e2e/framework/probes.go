// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// ProbeStates reads one pod's probe states, by probe name, from the node's
// NodePodProbe status. The Cluster's scheme must hold apps.kruise.io/v1alpha1.
func (c *Cluster) ProbeStates(ctx context.Context, node string, pod types.UID) (map[string]v1alpha1.ContainerProbeState, error) {
	npp := &v1alpha1.NodePodProbe{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: node}, npp); err != nil {
		return nil, err
	}
	out := map[string]v1alpha1.ContainerProbeState{}
	for _, ps := range npp.Status.PodProbeStatuses {
		if ps.UID != string(pod) {
			continue
		}
		for _, st := range ps.ProbeStates {
			out[st.Name] = st
		}
	}
	return out, nil
}

// WaitForProbeState polls the node's NodePodProbe status until the pod's
// probe has the wanted state.
func (c *Cluster) WaitForProbeState(ctx context.Context, node string, pod types.UID, probe string, want v1alpha1.ProbeState, timeout time.Duration) error {
	return WaitFor(ctx, timeout, fmt.Sprintf("probe %s %s", probe, want), func(ctx context.Context) (bool, string, error) {
		st, err := c.ProbeStates(ctx, node, pod)
		if err != nil {
			return false, err.Error(), nil
		}
		got, ok := st[probe]
		return ok && got.State == want, fmt.Sprintf("%+v", got), nil
	})
}
