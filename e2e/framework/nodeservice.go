// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probeshim/probeshim/e2e/nodesvc"
	"github.com/probeshim/probeshim/e2e/rig"
)

// NodeService is the probeshim node service running on the rig's node: the
// real binary, started by the test inside the rig's network namespace with the
// rig's containerd socket and a node kubeconfig (system:node:<node>), through
// nodesvc. Start takes the test; the rest is nodesvc.Service's.
type NodeService struct {
	*nodesvc.Service
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// nodeServiceBinary builds the node service once per test binary into a
// folder Main removes when the tests end.
func nodeServiceBinary() (string, error) {
	buildOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", buildDirPrefix)
		if err != nil {
			buildErr = err
			return
		}
		buildDirsMu.Lock()
		buildDirs = append(buildDirs, dir)
		buildDirsMu.Unlock()
		builtBin, buildErr = nodesvc.Build(context.Background(), root, dir)
	})
	return builtBin, buildErr
}

// buildDirPrefix starts the names of the temporary folders of the node
// service's build.
const buildDirPrefix = "probeshim-e2e-bin-"

var (
	buildDirsMu sync.Mutex
	buildDirs   []string // the builds' folders, removed by removeBuilds
)

// removeBuilds removes the folders of every build so far (Main calls it
// once the tests, and so every service started from them, have ended).
func removeBuilds() {
	buildDirsMu.Lock()
	defer buildDirsMu.Unlock()
	for _, d := range buildDirs {
		if err := os.RemoveAll(d); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: removing a build folder:", err)
		}
	}
	buildDirs = nil
}

// ModuleRoot is the folder of the probeshim module (from the working
// directory, which is inside it for tests and `go run`).
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/probeshim/probeshim").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root (go list -m github.com/probeshim/probeshim): %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("finding the module root: not inside the probeshim module")
	}
	return dir, nil
}

// InstallCRDs applies the project's CRDs, the namespaces (the node RBAC's
// lease Role lives in one) and the node RBAC (what a node may do with them),
// and waits until the CRDs are served.
func (c *Cluster) InstallCRDs(t testing.TB) {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := Context(t, 2*time.Minute)
	for _, args := range [][]string{
		{"apply", "--server-side", "-k", filepath.Join(root, "apis", "crds")},
		{"wait", "--for=condition=Established", "--timeout=60s", "crd/nodepodprobes.apps.kruise.io",
			"crd/podprobemarkers.apps.kruise.io", "crd/containerrecreaterequests.apps.kruise.io"},
		{"apply", "--server-side", "-f", filepath.Join(root, "cluster", "deploy", "namespace.yaml")},
		{"apply", "--server-side", "-f", filepath.Join(root, "cluster", "deploy", "rbac-nodes.yaml")},
	} {
		if out, err := c.Kubectl(ctx, args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// StartNodeService builds (once per test binary) and starts the node
// service; it is stopped when the test ends. extra flags are appended.
func (c *Cluster) StartNodeService(t testing.TB, extra ...string) *NodeService {
	t.Helper()
	node := c.Rig.NodeName()
	kubeconfig, err := c.nodeKubeconfig(node)
	if err != nil {
		t.Fatal(err)
	}
	s := c.launchNodeService(t, node, kubeconfig, c.ContainerdSocket(),
		fmt.Sprintf("127.0.0.1:%d", 20000+os.Getpid()%20000), extra)
	return s
}

// launchNodeService builds the binary (once per test binary) and starts a
// node service for node with its own folder, config file and status socket;
// it is stopped when the test ends (resumed first if paused).
func (c *Cluster) launchNodeService(t testing.TB, node, kubeconfig, containerdSocket, health string, extra []string) *NodeService {
	t.Helper()
	bin, err := nodeServiceBinary()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := nodesvc.New(c.Rig, nodesvc.Options{
		Bin:              bin,
		Node:             node,
		Kubeconfig:       kubeconfig,
		ContainerdSocket: containerdSocket,
		Health:           health,
		Dir:              t.TempDir(),
		Extra:            extra,
		Logf:             logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &NodeService{svc}
	t.Cleanup(func() {
		s.Resume() //nolint:errcheck // best effort before Stop, which kills it anyway
		s.Stop()
	})
	s.Start(t)
	return s
}

// Start starts the service (again) and waits until /readyz answers ok.
func (s *NodeService) Start(t testing.TB) {
	t.Helper()
	if err := s.Service.Start(Context(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
}

// GetInRig fetches url with a connection made inside the rig's network
// namespace (the node's loopback, where the node services listen). A status
// other than 200 is an error; the body comes back either way.
func (c *Cluster) GetInRig(ctx context.Context, url string) (string, error) {
	return rig.GetInNetNS(ctx, c.NetNSPath(), url)
}
