// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package nodesvc launches the node service (shim/cmd/probeshim) on the test
// rig: the real binary, inside the rig's network namespace, with a node's
// name, kubeconfig and containerd socket, a health port on the netns's
// loopback and a status socket. The e2e framework (suites, benchmarks) and
// `make demo` both start it through here; the framework adds testing.TB
// helpers and cleanups on top.
package nodesvc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/build/buildstore"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/shim/server"
)

// Package is the node service's command, as `go build` names it.
const Package = "./shim/cmd/probeshim"

// MetricsPackage is the node metrics proxy's command (probeshim-metrics).
const MetricsPackage = "./shim/cmd/probeshim-metrics"

// Build builds the node service from the module at root into dir (made if
// missing) and returns the binary's path, dir/probeshim.
func Build(ctx context.Context, root, dir string) (string, error) {
	return BuildCommand(ctx, root, dir, Package)
}

// BuildCommand builds the command pkg of the module at root into dir (made
// if missing) and returns the binary's path.
func BuildCommand(ctx context.Context, root, dir, pkg string) (string, error) {
	name := filepath.Base(pkg)
	err := buildstore.Build(ctx, []string{root, "CGO_ENABLED=0", "go", "build", "-o", name, pkg}, dir, func(out string) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(out, name), pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
		return nil
	})
	return filepath.Join(dir, name), err
}

// Options say how to run one node service.
type Options struct {
	Bin              string // the binary (Build)
	Node             string // --node-name
	Kubeconfig       string // whose identity it has
	ContainerdSocket string // the node's containerd
	// Health is host:port on the netns's loopback for /healthz, /readyz and
	// /metrics.
	Health string
	// Dir holds config.yaml, and the status socket, log and pid file unless
	// given; it is made if missing.
	Dir          string
	StatusSocket string // default Dir/probeshim.sock
	Log          string // default Dir/probeshim.log; each start appends
	Extra        []string
	// Detach has the service outlive this process (the demo's node service):
	// a session of its own and no parent-death signal, in the rig's daemon
	// cgroup so that the rig's teardown stops it, its pid in PidFile(Dir)
	// for StopDetached. Otherwise it is killed when this process dies.
	Detach bool
	// Logf tells what the launcher does beyond starting and stopping (a
	// SIGKILL after the grace period); nil prints nothing.
	Logf func(format string, args ...any)
}

// Service is one node service, started or not.
type Service struct {
	r    *rig.Rig
	o    Options
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// configComment is the config file's whole content: every setting is a flag.
const configComment = "# flags given on the command line\n"

// New prepares a service on r (its folder and config file) without starting it.
func New(r *rig.Rig, o Options) (*Service, error) {
	for name, v := range map[string]string{"Bin": o.Bin, "Node": o.Node, "Kubeconfig": o.Kubeconfig,
		"ContainerdSocket": o.ContainerdSocket, "Health": o.Health, "Dir": o.Dir} {
		if v == "" {
			return nil, fmt.Errorf("nodesvc: no %s in the options", name)
		}
	}
	if o.StatusSocket == "" {
		o.StatusSocket = filepath.Join(o.Dir, "probeshim.sock")
	}
	if o.Log == "" {
		o.Log = filepath.Join(o.Dir, "probeshim.log")
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	for _, d := range []string{o.Dir, filepath.Dir(o.StatusSocket), filepath.Dir(o.Log)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	cfgFile := filepath.Join(o.Dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(configComment), 0o644); err != nil {
		return nil, err
	}
	s := &Service{r: r, o: o}
	s.args = append([]string{
		"--config", cfgFile,
		"--node-name", o.Node,
		"--kubeconfig", o.Kubeconfig,
		"--containerd-socket", o.ContainerdSocket,
		"--health-address", o.Health,
		"--metrics-address", o.Health,
		"--status-socket", o.StatusSocket,
	}, o.Extra...)
	return s, nil
}

// Launch is New and Start.
func Launch(ctx context.Context, r *rig.Rig, o Options) (*Service, error) {
	s, err := New(r, o)
	if err != nil {
		return nil, err
	}
	return s, s.Start(ctx)
}

// StatusSocket is the service's `probeshim status` socket.
func (s *Service) StatusSocket() string { return s.o.StatusSocket }

// MetricsAddress is where the service serves /metrics (the netns's loopback).
func (s *Service) MetricsAddress() string { return s.o.Health }

// Kubeconfig is the service's identity.
func (s *Service) Kubeconfig() string { return s.o.Kubeconfig }

// ConfigFile is the service's config file.
func (s *Service) ConfigFile() string { return filepath.Join(s.o.Dir, "config.yaml") }

// LogPath is the file the service logs to.
func (s *Service) LogPath() string { return s.o.Log }

// Logs returns what the service logged so far.
func (s *Service) Logs() string {
	b, _ := os.ReadFile(s.o.Log)
	return string(b)
}

// PidFile is where a detached service started with dir as its Dir records
// its pid and start time.
func PidFile(dir string) string { return filepath.Join(dir, "probeshim.pid") }

// Start starts the service (again) and waits, within ctx, up to a minute
// until /readyz answers ok. A service that does not get ready is left
// running (Stop it, or for a detached one StopDetached) so that it can be
// looked at; one that exits fails Start at once with the end of its log.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("node service already running")
	}
	logFile, err := os.OpenFile(s.o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	// Not ctx: the service runs until stopped, not until the wait ends.
	cmd := s.r.Command(context.Background(), s.o.Bin, s.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = s.o.Dir
	if s.o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		logFile.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }() // the exit is seen through done; its status is in the log
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	if s.o.Detach {
		if err := s.detached(cmd.Process.Pid); err != nil {
			s.Kill()
			return err
		}
	}

	err = poll.Until(ctx, time.Minute, "node service ready (/readyz)", func(ctx context.Context) (bool, string, error) {
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
		return fmt.Errorf("%w\nlog (%s):\n%s", err, s.o.Log, logtail.Last(s.Logs(), 30))
	}
	return nil
}

// detached puts a detached service's process (nsenter execs the service: the
// same pid) into the rig's daemon cgroup and records it in the pid file.
func (s *Service) detached(pid int) error {
	if err := s.r.JoinDaemonCgroup(pid); err != nil {
		return err
	}
	return os.WriteFile(PidFile(s.o.Dir), fmt.Appendf(nil, "%d %d\n", pid, rig.ProcStartTime(pid)), 0o644)
}

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 15 * time.Second

// Stop sends SIGTERM and waits for the service to exit (SIGKILL after 15 s).
func (s *Service) Stop() { s.signal(syscall.SIGTERM, stopGrace) }

// Kill kills the service with SIGKILL, as a crash would.
func (s *Service) Kill() { s.signal(syscall.SIGKILL, 0) }

func (s *Service) signal(sig syscall.Signal, grace time.Duration) {
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
		if sig != syscall.SIGKILL {
			s.o.Logf("node service (pid %d) still running %s after %s: SIGKILL", cmd.Process.Pid, grace, sig)
		}
		_ = cmd.Process.Kill()
		<-done
	}
}

// Pause stops the running service with SIGSTOP: the process stays, holds its
// sockets and does nothing (a hung service). Resume, Stop and Kill work on a
// paused service.
func (s *Service) Pause() error { return s.send(syscall.SIGSTOP) }

// Resume continues a paused service (SIGCONT); a no-op when it runs.
func (s *Service) Resume() error { return s.send(syscall.SIGCONT) }

func (s *Service) send(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	// The command is nsenter, which execs the service: the pid is the service's.
	return s.cmd.Process.Signal(sig)
}

// Pid is the running service's process ID, 0 when it is not running.
func (s *Service) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the service's process exists (paused counts).
func (s *Service) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Status reads `probeshim status` from the running service.
func (s *Service) Status(ctx context.Context) (*server.Status, error) {
	return server.FetchStatus(ctx, s.o.StatusSocket)
}

// CPUProfile records the service's CPU for d through its status socket.
func (s *Service) CPUProfile(ctx context.Context, d time.Duration) ([]byte, error) {
	return server.FetchCPUProfile(ctx, s.o.StatusSocket, d)
}

// Get fetches a path of the service's local HTTP endpoint (health, metrics),
// which listens on loopback inside the rig's netns.
func (s *Service) Get(ctx context.Context, path string) (string, error) {
	return rig.GetInNetNS(ctx, s.r.NetNSPath(), "http://"+s.o.Health+path)
}

// StopDetached stops the detached service whose pid file is in dir, from any
// process (`demo down`): SIGTERM, and SIGKILL after 15 s. No pid file, or a
// pid that names another process by now, is nothing to stop.
func StopDetached(dir string, logf func(format string, args ...any)) error {
	b, err := os.ReadFile(PidFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscan(string(b), &pid, &start); err != nil || pid <= 1 {
		return fmt.Errorf("pid file %s: %q", PidFile(dir), b)
	}
	if start == 0 || rig.ProcStartTime(pid) != start {
		return nil // gone already (the pid may belong to another process now)
	}
	logf("stopping the node service (pid %d)", pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopGrace)
	for rig.ProcStartTime(pid) == start && !zombie(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func zombie(pid int) bool {
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return strings.Contains(string(st), ") Z ")
}
