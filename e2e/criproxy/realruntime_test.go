// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probeshim/probeshim/e2e/framework"
)

// TestRealRuntimePackages runs the tests of shim/runtime and shim/criproxy that need a real containerd
// (TestReal*: exec, sandboxes and netns, the tracker and its reconnect, the proxy in front of the CRI)
// against the rig's containerd. Without a containerd they skip, so without this test they would never
// run in CI. The kubelet is stopped meanwhile: it kills the running pods it does not know.
func TestRealRuntimePackages(t *testing.T) {
	c := framework.Get(t)
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Rig.StopComponent("kubelet"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restartKubelet(t, c) })

	ctx := framework.Context(t, 10*time.Minute)
	ctl := containerdControl(t, ctx, c)
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-run", "^TestReal", "./shim/runtime/", "./shim/criproxy/")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"PROBESHIM_CONTAINERD_SOCKET="+c.ContainerdSocket(),
		"PROBESHIM_CONTAINERD_CTL="+ctl)
	out, err := cmd.CombinedOutput()
	t.Logf("go test -run ^TestReal ./shim/runtime/ ./shim/criproxy/ against %s:\n%s", c.ContainerdSocket(), out)
	if err != nil {
		t.Fatalf("the real-containerd tests failed: %v", err)
	}
	ran := 0
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "--- SKIP") {
			t.Errorf("skipped with a real containerd at hand: %s", line)
		}
		if strings.HasPrefix(line, "--- PASS: TestReal") {
			ran++
		}
	}
	if ran < 6 { // TestRealExec, ...SandboxAndNetns, ...Tracker, ...TrackerReconnect, ...ExecBackgroundChild, TestRealContainerd
		t.Errorf("only %d TestReal* tests passed, want all 6", ran)
	}
}

// containerdControl returns a command for PROBESHIM_CONTAINERD_CTL ("CMD stop" / "CMD start") that
// stops and starts the rig's containerd. The rig belongs to this process, so the command asks it
// through a pair of FIFOs and waits for the answer.
func containerdControl(t *testing.T, ctx context.Context, c *framework.Cluster) string {
	dir := t.TempDir()
	req, ack := filepath.Join(dir, "req"), filepath.Join(dir, "ack")
	for _, p := range []string{req, ack} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "containerd-ctl")
	body := fmt.Sprintf("#!/bin/sh\necho \"$1\" >%s\nread -r answer <%s\n[ \"$answer\" = ok ] || { echo \"$answer\" >&2; exit 1; }\n", req, ack)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, err := os.Open(req) // blocks until the command (or the cleanup below) writes
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			var answer string
			switch verb := strings.TrimSpace(line); verb {
			case "quit":
				return
			case "stop":
				answer = errText(c.Rig.StopComponent("containerd"))
			case "start":
				answer = errText(c.Rig.StartComponent(ctx, "containerd"))
			default:
				answer = fmt.Sprintf("unknown verb %q (want stop or start)", verb)
			}
			if a, err := os.OpenFile(ack, os.O_WRONLY, 0); err == nil {
				fmt.Fprintln(a, answer)
				a.Close()
			}
		}
	}()
	t.Cleanup(func() {
		if f, err := os.OpenFile(req, os.O_WRONLY, 0); err == nil {
			fmt.Fprintln(f, "quit")
			f.Close()
		}
		<-done
		// The test may have left containerd stopped after a failure; the suite's next tests need it.
		err := c.Rig.StartComponent(context.Background(), "containerd")
		if err != nil && !strings.Contains(err.Error(), "already running") {
			t.Logf("starting containerd again: %v", err)
		}
	})
	return script
}

func errText(err error) string {
	if err != nil {
		return strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "ok"
}
