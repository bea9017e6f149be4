// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package restart checks that the rig recovers from being started twice and
// from the death of the process that started it. Each test brings up rigs of
// its own; there is no shared rig in this binary.
package restart

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

const helperEnv = "PROBESHIM_RIG_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
		}
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// helper is the child process the kill -9 tests start: it brings a rig up,
// says READY on stdout and waits to be killed. Mode "up2" brings up two
// nodes and runs a pod on the second first, so that its containerd has
// shims, mounts and a pod netns to leave behind.
func helper(mode string) error {
	cfg := config()
	if mode == "up2" {
		cfg.Nodes = 2
	}
	r, err := rig.Start(context.Background(), cfg)
	if err != nil {
		return err
	}
	if mode == "up2" {
		if err := runPodOn(r, r.Nodes()[1].Name()); err != nil {
			return err
		}
	}
	fmt.Println("READY", r.NodeName())
	select {}
}

// runPodOn runs a pod on the named node and waits until it runs.
func runPodOn(r *rig.Rig, node string) error {
	c, err := framework.NewCluster(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := framework.NewPod("default", "on-"+node, framework.Command("main", "sleep", "1000000"))
	p.Spec.NodeName = node
	if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = c.WaitForPod(ctx, "default", p.Name, 2*time.Minute, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	return err
}

func config() rig.Config {
	return rig.Config{Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
}

func skipUnlessAvailable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if reason := framework.Unavailable(); reason != "" {
		t.Skip(reason)
	}
}

// recordedPIDs reads the PIDs in the state file of the rig with cfg.
func recordedPIDs(t *testing.T, cfg rig.Config) []int {
	t.Helper()
	b, err := os.ReadFile(rig.StateFile(cfg))
	if err != nil {
		return nil
	}
	var st struct {
		Processes []struct{ PID int } `json:"processes"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range st.Processes {
		pids = append(pids, p.PID)
	}
	return pids
}

// running reports the pids that are alive and not zombies.
func running(pids []int) []int {
	var out []int
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err == nil && !strings.Contains(string(b), ") Z ") {
			out = append(out, p)
		}
	}
	return out
}

func requireClean(t *testing.T, cfg rig.Config) {
	t.Helper()
	if left := rig.Leftovers(cfg); len(left) > 0 {
		t.Fatalf("left behind: %s", strings.Join(left, "\n  "))
	}
}

func TestStartTwiceInARow(t *testing.T) {
	skipUnlessAvailable(t)
	ctx := framework.Context(t, 5*time.Minute)
	cfg := config()
	first, err := rig.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Stop(context.Background()) })
	firstPIDs := recordedPIDs(t, cfg)
	second, err := rig.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	if alive := running(firstPIDs); len(alive) > 0 {
		t.Errorf("processes of the first rig still run after the second start: %v", alive)
	}
	c, err := framework.NewCluster(second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().Nodes().Get(ctx, second.NodeName(), metav1Get); err != nil {
		t.Fatalf("second rig's node: %v", err)
	}
	if err := second.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(ctx); err != nil { // a no-op by now: must not fail
		t.Fatal(err)
	}
	requireClean(t, cfg)
}

// startHelper runs this test binary as a helper that brings a rig up (mode
// "up", or "up2" for two nodes).
func startHelper(t *testing.T, mode ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	m := "up"
	if len(mode) > 0 {
		m = mode[0]
	}
	cmd.Env = append(os.Environ(), helperEnv+"="+m)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewScanner(stdout)
}

func TestKillDashNineAfterUpThenStart(t *testing.T) {
	skipUnlessAvailable(t)
	cfg := config()
	cmd, out := startHelper(t)
	waitHelperReady(t, out, 3*time.Minute)
	pids := recordedPIDs(t, cfg)
	// While the helper lives, a Start elsewhere waits for it rather than
	// tearing its rig down.
	waitCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := rig.Start(waitCtx, cfg)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("Start while another process holds the rig: want a lock timeout, got %v", err)
	}
	if alive := running(pids); len(alive) != len(pids) {
		t.Fatalf("a waiting Start must not touch the running rig: %d of %v alive", len(alive), pids)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if alive := running(pids); len(alive) != len(pids) {
		t.Fatalf("the helper's rig should outlive it: %d of %v alive", len(alive), pids)
	}
	ctx := framework.Context(t, 5*time.Minute)
	r, err := rig.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start after kill -9: %v", err)
	}
	if alive := running(pids); len(alive) > 0 {
		t.Errorf("processes of the killed helper's rig still run: %v", alive)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	requireClean(t, cfg)
}

// A two-node rig whose starter was killed, with a pod on its second node, is
// cleaned away by the next Start of a one-node rig (the next suite), which
// leaves nothing of the second node behind when it stops.
func TestKillDashNineTwoNodesThenOneNodeStart(t *testing.T) {
	skipUnlessAvailable(t)
	cfg := config()
	cmd, out := startHelper(t, "up2")
	waitHelperReady(t, out, 4*time.Minute)
	pids := recordedPIDs(t, cfg)
	if len(pids) < 9 {
		t.Fatalf("the two-node rig recorded %d processes, want its 9 components at least", len(pids))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ctx := framework.Context(t, 5*time.Minute)
	r, err := rig.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("one-node start after a killed two-node rig: %v", err)
	}
	if alive := running(pids); len(alive) > 0 {
		t.Errorf("processes of the killed two-node rig still run: %v", alive)
	}
	if n := len(r.Nodes()); n != 1 {
		t.Errorf("the new rig has %d nodes, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(r.Dir(), "nodes")); !os.IsNotExist(err) {
		t.Errorf("the second node's folder survived the new start: %v", err)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	requireClean(t, cfg)
}

func TestKillDashNineDuringBringUpThenTeardown(t *testing.T) {
	skipUnlessAvailable(t)
	cfg := config()
	cmd, _ := startHelper(t)
	// Kill it once the API server has been started: etcd, containerd and
	// kube-apiserver run, the kubelet may.
	err := framework.WaitFor(context.Background(), 3*time.Minute, "the helper to start kube-apiserver", func(context.Context) (bool, string, error) {
		n := len(recordedPIDs(t, cfg))
		return n >= 3, fmt.Sprintf("%d processes recorded", n), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pids := recordedPIDs(t, cfg)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// What `make rig-down` does.
	if err := rig.Teardown(framework.Context(t, time.Minute), cfg); err != nil {
		t.Fatal(err)
	}
	if alive := running(pids); len(alive) > 0 {
		t.Errorf("still running after teardown: %v", alive)
	}
	requireClean(t, cfg)
}

var metav1Get = metav1.GetOptions{}

// waitHelperReady waits for the helper to say READY on out: its rig is up.
func waitHelperReady(t *testing.T, out *bufio.Scanner, within time.Duration) {
	t.Helper()
	ready := make(chan bool, 1)
	go func() {
		for out.Scan() {
			if strings.HasPrefix(out.Text(), "READY") {
				ready <- true
				return
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("helper exited before its rig was up")
		}
	case <-time.After(within):
		t.Fatalf("helper's rig not up after %s", within)
	}
}
