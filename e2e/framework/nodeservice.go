// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/logtail"
	"github.com/probeshim/probeshim/shim/server"
)

// NodeService is the probeshim node service running on the rig's node: the
// real binary, started by the test inside the rig's network namespace with the
// rig's containerd socket and a node kubeconfig (system:node:<node>).
type NodeService struct {
	c      *Cluster
	dir    string
	args   []string
	health string // host:port inside the netns

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// BuildBinary builds a command of this module (e.g. "./shim/cmd/probeshim")
// into a temporary folder and returns its path. Main removes the folders of
// the binary's builds when the tests end; other callers remove
// filepath.Dir(path) themselves.
func BuildBinary(pkg string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", buildDirPrefix)
	if err != nil {
		return "", err
	}
	buildDirsMu.Lock()
	buildDirs = append(buildDirs, dir)
	buildDirsMu.Unlock()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// buildDirPrefix starts the names of BuildBinary's temporary folders.
const buildDirPrefix = "probeshim-e2e-bin-"

var (
	buildDirsMu sync.Mutex
	buildDirs   []string // BuildBinary's folders, removed by removeBuilds
)

// removeBuilds removes the folders of every BuildBinary so far (Main calls it
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
	t.Cleanup(s.Stop)
	return s
}

// launchNodeService builds the binary (once per test binary) and starts a
// node service for node with its own folder, config file and status socket.
func (c *Cluster) launchNodeService(t testing.TB, node, kubeconfig, containerdSocket, health string, extra []string) *NodeService {
	t.Helper()
	buildOnce.Do(func() { builtBin, buildErr = BuildBinary("./shim/cmd/probeshim") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &NodeService{c: c, dir: dir, health: health}
	s.args = append([]string{builtBin,
		"--config", cfgFile,
		"--node-name", node,
		"--kubeconfig", kubeconfig,
		"--containerd-socket", containerdSocket,
		"--health-address", s.health,
		"--metrics-address", s.health,
		"--status-socket", s.StatusSocket(),
	}, extra...)
	s.Start(t)
	return s
}

// StatusSocket is the service's `probeshim status` socket.
func (s *NodeService) StatusSocket() string { return filepath.Join(s.dir, "probeshim.sock") }

// LogPath is the file the service logs to.
func (s *NodeService) LogPath() string { return filepath.Join(s.dir, "probeshim.log") }

// Logs returns what the service logged so far.
func (s *NodeService) Logs() string {
	b, _ := os.ReadFile(s.LogPath())
	return string(b)
}

// Start starts the service (again) and waits until /readyz answers ok.
func (s *NodeService) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		t.Fatal("node service already running")
	}
	logf, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.mu.Unlock()
		t.Fatal(err)
	}
	cmd := s.c.Rig.Command(context.Background(), s.args[0], s.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		logf.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }() // the exit is seen through done; its status is in the log
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	ctx := Context(t, time.Minute)
	err = WaitFor(ctx, time.Minute, "node service ready (/readyz)", func(ctx context.Context) (bool, string, error) {
		select {
		case <-done:
			return false, "", fmt.Errorf("node service exited: %s", logtail.Last(s.Logs(), 20))
		default:
		}
		body, err := s.Get(ctx, "/readyz")
		if err != nil {
			return false, fmt.Sprintf("%v %s", err, body), nil
		}
		return strings.TrimSpace(body) == "ok", body, nil
	})
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, logtail.Last(s.Logs(), 30))
	}
}

// Stop sends SIGTERM and waits for the service to exit (SIGKILL after 15 s).
func (s *NodeService) Stop() { s.signal(syscall.SIGTERM, 15*time.Second) }

// Kill kills the service with SIGKILL, as a crash would.
func (s *NodeService) Kill() { s.signal(syscall.SIGKILL, 0) }

func (s *NodeService) signal(sig syscall.Signal, grace time.Duration) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Pid is the running service's process ID, 0 when it is not running.
func (s *NodeService) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Status reads `probeshim status` from the running service.
func (s *NodeService) Status(ctx context.Context) (*server.Status, error) {
	return server.FetchStatus(ctx, s.StatusSocket())
}

// CPUProfile records the service's CPU for d through its status socket.
func (s *NodeService) CPUProfile(ctx context.Context, d time.Duration) ([]byte, error) {
	return server.FetchCPUProfile(ctx, s.StatusSocket(), d)
}

// Get fetches a path of the service's local HTTP endpoint (health, metrics),
// which listens on loopback inside the rig's netns.
func (s *NodeService) Get(ctx context.Context, path string) (string, error) {
	return s.c.GetInRig(ctx, "http://"+s.health+path)
}

// GetInRig fetches url with a connection made inside the rig's network
// namespace (the node's loopback, where the node services listen). A status
// other than 200 is an error; the body comes back either way.
func (c *Cluster) GetInRig(ctx context.Context, url string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return rig.DialNetNS(ctx, c.NetNSPath(), network, addr)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}
