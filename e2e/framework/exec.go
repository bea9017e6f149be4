// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Exec runs cmd in a container through the API server and the kubelet
// (`kubectl exec`, run inside the rig's netns) and returns its stdout and
// stderr. A non-zero exit is an error whose text includes stderr.
//
// (client-go's remotecommand would need modules the project's go.mod does not
// have; kubectl takes the same path through the API server.)
func (c *Cluster) Exec(ctx context.Context, ns, pod, container string, cmd ...string) (stdout, stderr string, err error) {
	args := append([]string{"exec", "-n", ns, pod, "-c", container, "--"}, cmd...)
	k := c.Rig.Kubectl(ctx, args...)
	var out, errOut bytes.Buffer
	k.Stdout, k.Stderr = &out, &errOut
	if err := k.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("exec %q in %s/%s/%s: %w (stderr: %s)", strings.Join(cmd, " "), ns, pod, container, err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), nil
}

// ExecSync runs cmd in a container straight through the CRI (containerd),
// bypassing the API server and the kubelet, and returns stdout, stderr and
// the exit code.
func (c *Cluster) ExecSync(ctx context.Context, containerID string, timeout time.Duration, cmd ...string) (stdout, stderr string, exitCode int32, err error) {
	rs, conn, err := c.CRI()
	if err != nil {
		return "", "", 0, err
	}
	defer conn.Close()
	resp, err := rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: strings.TrimPrefix(containerID, "containerd://"), Cmd: cmd, Timeout: int64(timeout / time.Second)})
	if err != nil {
		return "", "", 0, fmt.Errorf("CRI ExecSync %q: %w", strings.Join(cmd, " "), err)
	}
	return string(resp.Stdout), string(resp.Stderr), resp.ExitCode, nil
}

// Kubectl runs the rig's kubectl as rig-admin inside the rig's netns and
// returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := c.Rig.Kubectl(ctx, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// RunInNetNS runs a program inside the rig's network namespace (where the
// API server, the kubelet and the pod network are reachable) and returns its
// combined output.
func (c *Cluster) RunInNetNS(ctx context.Context, name string, args ...string) (string, error) {
	out, err := c.Rig.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s (in netns): %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
