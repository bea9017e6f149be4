// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// pidnsHelperEnv makes the test binary, started in a PID namespace of its own, report what
// sharesPIDNamespace says of the socket it names.
// pidnsListenEnv makes it serve the socket it names until killed.
const (
	pidnsHelperEnv = "PROBESHIM_TEST_PIDNS_DIAL"
	pidnsListenEnv = "PROBESHIM_TEST_PIDNS_LISTEN"
)

func init() {
	if socket := os.Getenv(pidnsListenEnv); socket != "" {
		serveUntilKilled(socket)
	}
	socket := os.Getenv(pidnsHelperEnv)
	if socket == "" {
		return
	}
	shared, err := sharesPIDNamespace(socket)
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error())
		os.Exit(1)
	}
	if shared {
		os.Stdout.WriteString("shared")
	} else {
		os.Stdout.WriteString("not shared")
	}
	os.Exit(0)
}

func serveUntilKilled(socket string) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		os.Exit(1)
	}
	for {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}
}

func TestSharesPIDNamespace(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "containerd.sock")
	go serveUntilKilled(socket)
	if err := waitForSocket(socket); err != nil {
		t.Fatal(err)
	}

	if shared, err := sharesPIDNamespace(socket); err != nil || !shared {
		t.Errorf("a socket this process serves: shared %v, err %v; want shared", shared, err)
	}
	if _, err := sharesPIDNamespace(filepath.Join(t.TempDir(), "absent.sock")); !errors.Is(err, errNotServed) {
		t.Errorf("no one listening: %v, want errNotServed (asked again at the next exec)", err)
	}

	if os.Geteuid() != 0 {
		t.Skip("skipped: a PID namespace of its own needs root")
	}
	// This service in a PID namespace below containerd's (a container on the host): the kernel
	// gives the peer's pid as 0.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pidnsHelperEnv+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "not shared" {
		t.Errorf("dialled from a PID namespace of its own: %q, err %v; want not shared", out, err)
	}
}

func TestSharesPIDNamespaceBelowUs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: a PID namespace of its own needs root")
	}
	// containerd in a PID namespace below this service's: its pid is visible, its namespace not
	// ours.
	socket := filepath.Join(t.TempDir(), "containerd.sock")
	// A client made while containerd is not up yet cannot tell: pipes, until its next exec asks again.
	c, err := New(WithContainerdSocket(socket))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.pipes.Load() || c.pidNSKnown.Load() {
		t.Fatalf("made without containerd: pipes %v, told %v; want pipes, not told", c.pipes.Load(), c.pidNSKnown.Load())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pidnsListenEnv+"="+socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := waitForSocket(socket); err != nil {
		t.Fatal(err)
	}
	if shared, err := sharesPIDNamespace(socket); err != nil || shared {
		t.Errorf("served from a PID namespace below ours: shared %v, err %v; want not shared", shared, err)
	}
	c.checkPIDNamespace() // what an exec does first
	if c.pipes.Load() || !c.pidNSKnown.Load() {
		t.Errorf("once containerd is up in another PID namespace: pipes %v, told %v; want FIFOs, told", c.pipes.Load(), c.pidNSKnown.Load())
	}
}

// waitForSocket waits until socket accepts a connection.
func waitForSocket(socket string) error {
	return poll.Until(context.Background(), 10*time.Second, socket+" served", func(context.Context) (bool, string, error) {
		c, err := net.Dial("unix", socket)
		if err != nil {
			return false, err.Error(), nil
		}
		c.Close()
		return true, "", nil
	})
}
