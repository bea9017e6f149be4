// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package node

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/e2e/framework"
)

// TestRigRunsTheRowsRuntime: the node under test is the matrix row's pair
// (PROBESHIM_ROW) — the kubelet and containerd versions the Node reports — and
// its containers run through the runc the rig built, not whatever runtime the
// machine has on its PATH.
func TestRigRunsTheRowsRuntime(t *testing.T) {
	c := framework.Get(t)
	row := c.Rig.Row()
	ctx := framework.Context(t, 2*time.Minute)
	node, err := c.Kube.CoreV1().Nodes().Get(ctx, c.Rig.NodeName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	t.Logf("row %s: kubelet %s, runtime %s, runc %s", row.Name, info.KubeletVersion, info.ContainerRuntimeVersion, c.Rig.Runc())
	if !strings.HasPrefix(info.KubeletVersion, "v"+row.Kube+".") {
		t.Errorf("kubelet %s, row %s wants Kubernetes %s", info.KubeletVersion, row.Name, row.Kube)
	}
	if v := strings.TrimPrefix(strings.TrimPrefix(info.ContainerRuntimeVersion, "containerd://"), "v"); !strings.HasPrefix(v, row.Containerd+".") {
		t.Errorf("container runtime %s, row %s wants containerd %s", info.ContainerRuntimeVersion, row.Name, row.Containerd)
	}

	pod := c.CreatePod(t, framework.NewPod(c.Namespace(t), "runtime", framework.Command("app", "sleep", "3600")))
	pod = c.WaitForPodReady(t, pod, time.Minute)
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	rs, conn, err := c.CRI()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	// containerd's verbose container info carries the runtime's options,
	// where the rig's config names runc by BinaryName.
	var v struct {
		RuntimeType    string         `json:"runtimeType"`
		RuntimeOptions map[string]any `json:"runtimeOptions"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &v); err != nil {
		t.Fatalf("container info: %v\n%s", err, st.Info["info"])
	}
	if got := v.RuntimeOptions["binary_name"]; v.RuntimeType != "io.containerd.runc.v2" || got != c.Rig.Runc() {
		t.Errorf("container %s runs on %s with runc %v, want io.containerd.runc.v2 with %s (options %v)",
			id, v.RuntimeType, got, c.Rig.Runc(), v.RuntimeOptions)
	}
}
