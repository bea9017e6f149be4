// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/prober"
)

// Labels the kubelet puts on every sandbox and container (and containerd's
// CRI copies onto the containerd objects).
const (
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelContainerName = "io.kubernetes.container.name"
	// labelKind is containerd CRI's own label: "sandbox" or "container".
	labelKind = "io.cri-containerd.kind"
)

// Sandbox is a pod's sandbox as the runtime reports it.
type Sandbox struct {
	ID        string
	PodUID    string
	Namespace string
	Name      string
	Ready     bool
	CreatedAt time.Time
	// HostNetwork: the pod uses the node's network namespace.
	HostNetwork bool
	// NetNSPath is the pod's network namespace (e.g. /var/run/netns/cni-…);
	// empty for hostNetwork pods or when the runtime did not report it.
	NetNSPath string
	// IPs are the pod's IPs as the runtime reports them (PodSandboxStatus
	// network ip and additional ips); empty for hostNetwork pods.
	IPs []string
}

// Container is one container of a pod as CRI reports it.
type Container struct {
	ID        string
	SandboxID string
	PodUID    string
	Namespace string
	PodName   string
	Name      string
	Attempt   uint32
	State     criapi.ContainerState
	CreatedAt time.Time
	// StartedAt is set by PodContainers for running containers only.
	StartedAt time.Time
}

// Running reports whether the container is running.
func (c Container) Running() bool { return c.State == criapi.ContainerState_CONTAINER_RUNNING }

// PodSandbox finds the pod's current sandbox: the newest ready one, else the
// newest. It returns ErrNotFound when the pod has none on this node.
func (c *Client) PodSandbox(ctx context.Context, podUID string) (Sandbox, error) {
	resp, err := c.cri.ListPodSandbox(ctx, &criapi.ListPodSandboxRequest{
		Filter: &criapi.PodSandboxFilter{LabelSelector: map[string]string{LabelPodUID: podUID}},
	})
	if err != nil {
		return Sandbox{}, wrapErr(err, "list sandboxes of pod %s", podUID)
	}
	var best *criapi.PodSandbox
	for _, sb := range resp.GetItems() {
		if sb == nil || sb.GetId() == "" {
			continue
		}
		if best == nil || newerSandbox(sb, best) {
			best = sb
		}
	}
	if best == nil {
		return Sandbox{}, fmt.Errorf("sandbox of pod %s: %w", podUID, ErrNotFound)
	}
	st, err := c.cri.PodSandboxStatus(ctx, &criapi.PodSandboxStatusRequest{PodSandboxId: best.GetId(), Verbose: true})
	if err != nil {
		return Sandbox{}, wrapErr(err, "status of sandbox %s of pod %s", best.GetId(), podUID)
	}
	s := st.GetStatus()
	sb := Sandbox{
		ID:          best.GetId(),
		PodUID:      podUID,
		Namespace:   best.GetMetadata().GetNamespace(),
		Name:        best.GetMetadata().GetName(),
		Ready:       s.GetState() == criapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:   time.Unix(0, s.GetCreatedAt()),
		HostNetwork: s.GetLinux().GetNamespaces().GetOptions().GetNetwork() == criapi.NamespaceMode_NODE,
	}
	if !sb.HostNetwork {
		sb.NetNSPath = netNSPath(st.GetInfo())
		if ip := s.GetNetwork().GetIp(); ip != "" {
			sb.IPs = append(sb.IPs, ip)
		}
		for _, ip := range s.GetNetwork().GetAdditionalIps() {
			if ip.GetIp() != "" {
				sb.IPs = append(sb.IPs, ip.GetIp())
			}
		}
	}
	return sb, nil
}

func newerSandbox(a, b *criapi.PodSandbox) bool {
	ar, br := a.GetState() == criapi.PodSandboxState_SANDBOX_READY, b.GetState() == criapi.PodSandboxState_SANDBOX_READY
	if ar != br {
		return ar
	}
	return a.GetCreatedAt() > b.GetCreatedAt()
}

// sandboxInfo is the part of containerd's verbose sandbox status ("info")
// that tells the network namespace. Every containerd from 1.6 to 2.x puts
// it in runtimeSpec (the sandbox container's OCI spec); 1.7's and 2.x's
// sandbox controllers also give sandboxMetadata, versioned, whose NetNSPath
// is the only source when runtimeSpec is left out (2.x: a sandbox that is
// not fully created, or a sandboxer without a sandbox container).
type sandboxInfo struct {
	NetNamespaceClosed bool `json:"netNamespaceClosed"`
	RuntimeSpec        *struct {
		Linux *struct {
			Namespaces []struct {
				Type string `json:"type"`
				Path string `json:"path"`
			} `json:"namespaces"`
		} `json:"linux"`
	} `json:"runtimeSpec"`
	SandboxMetadata *struct {
		Version  string `json:"Version"`
		Metadata struct {
			NetNSPath string `json:"NetNSPath"`
		} `json:"Metadata"`
	} `json:"sandboxMetadata"`
}

// netNSPath reads the network namespace path from the verbose status info;
// "" when absent, closed or unparsable (never an error: the caller decides).
func netNSPath(info map[string]string) string {
	var si sandboxInfo
	if err := json.Unmarshal([]byte(info["info"]), &si); err != nil || si.NetNamespaceClosed {
		return ""
	}
	if si.RuntimeSpec != nil && si.RuntimeSpec.Linux != nil {
		for _, ns := range si.RuntimeSpec.Linux.Namespaces {
			if ns.Type == "network" && ns.Path != "" {
				return ns.Path
			}
		}
	}
	if md := si.SandboxMetadata; md != nil && md.Version == "v1" {
		return md.Metadata.NetNSPath
	}
	return ""
}

// PodNetwork returns the pod's network namespace path and IPs, or
// hostNetwork. It has the shape of netns.Resolver. A pod without a sandbox,
// or whose sandbox is not ready, has no usable namespace: ErrNotFound, and
// prober.ErrNamespaceGone for the engine.
func (c *Client) PodNetwork(ctx context.Context, podUID string) (path string, hostNetwork bool, ips []string, err error) {
	sb, err := c.PodSandbox(ctx, podUID)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil, fmt.Errorf("%w: %w", prober.ErrNamespaceGone, err)
	}
	if err != nil {
		return "", false, nil, err
	}
	if sb.HostNetwork {
		return "", true, nil, nil
	}
	if !sb.Ready || sb.NetNSPath == "" {
		return "", false, nil, fmt.Errorf("%w: pod %s (sandbox %s, ready %t): %w", prober.ErrNamespaceGone, podUID, sb.ID, sb.Ready, ErrNotFound)
	}
	return sb.NetNSPath, false, sb.IPs, nil
}

// PodContainers lists the pod's containers, newest first, with StartedAt of
// the running ones.
func (c *Client) PodContainers(ctx context.Context, podUID string) ([]Container, error) {
	cs, err := c.listContainers(ctx, map[string]string{LabelPodUID: podUID})
	if err != nil {
		return nil, err
	}
	for i := range cs {
		if cs[i].Running() {
			if err := c.fillStatus(ctx, &cs[i]); err != nil {
				return nil, err
			}
		}
	}
	return cs, nil
}

// listContainers lists CRI containers matching labels (all when nil),
// newest first. Entries without an ID or pod UID are skipped.
func (c *Client) listContainers(ctx context.Context, labels map[string]string) ([]Container, error) {
	req := &criapi.ListContainersRequest{}
	if labels != nil {
		req.Filter = &criapi.ContainerFilter{LabelSelector: labels}
	}
	resp, err := c.cri.ListContainers(ctx, req)
	if err != nil {
		return nil, wrapErr(err, "list containers")
	}
	out := make([]Container, 0, len(resp.GetContainers()))
	for _, ct := range resp.GetContainers() {
		l := ct.GetLabels()
		name := l[LabelContainerName]
		if name == "" {
			name = ct.GetMetadata().GetName()
		}
		if ct.GetId() == "" || l[LabelPodUID] == "" || name == "" {
			continue
		}
		out = append(out, Container{
			ID:        ct.GetId(),
			SandboxID: ct.GetPodSandboxId(),
			PodUID:    l[LabelPodUID],
			Namespace: l[LabelPodNamespace],
			PodName:   l[LabelPodName],
			Name:      name,
			Attempt:   ct.GetMetadata().GetAttempt(),
			State:     ct.GetState(),
			CreatedAt: time.Unix(0, ct.GetCreatedAt()),
		})
	}
	slices.SortStableFunc(out, func(a, b Container) int { return -cmp.Compare(a.CreatedAt.UnixNano(), b.CreatedAt.UnixNano()) })
	return out, nil
}

// fillStatus sets State and StartedAt from ContainerStatus.
func (c *Client) fillStatus(ctx context.Context, ct *Container) error {
	resp, err := c.cri.ContainerStatus(ctx, &criapi.ContainerStatusRequest{ContainerId: ct.ID})
	if err != nil {
		return wrapErr(err, "status of container %s", ct.ID)
	}
	st := resp.GetStatus()
	if st == nil {
		return fmt.Errorf("status of container %s: empty reply: %w", ct.ID, ErrNotFound)
	}
	ct.State = st.GetState()
	if st.GetStartedAt() > 0 {
		ct.StartedAt = time.Unix(0, st.GetStartedAt())
	}
	return nil
}

// StopContainer stops a container through CRI: the stop signal, then
// SIGKILL after grace (at least 2 s, as for a container recreation). ctx
// must outlive the grace period.
func (c *Client) StopContainer(ctx context.Context, containerID string, grace time.Duration) error {
	grace = max(grace, 2*time.Second)
	_, err := c.cri.StopContainer(ctx, &criapi.StopContainerRequest{ContainerId: containerID, Timeout: int64((grace + time.Second - 1) / time.Second)})
	return wrapErr(err, "stop container %s", containerID)
}
