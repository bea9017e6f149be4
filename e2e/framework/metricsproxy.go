// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/probeshim/probeshim/e2e/nodesvc"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/testkit/logtail"
)

var (
	metricsBuildOnce sync.Once
	metricsBin       string
	metricsBuildErr  error
)

// StartMetricsProxy starts probeshim-metrics for svc on listen (host:port in the rig's netns, a
// node's address), with svc's identity and configuration, as probeshim-metrics.socket starts it on
// a node; it is stopped when the test ends. It returns once the port accepts connections.
func (c *Cluster) StartMetricsProxy(t testing.TB, svc *NodeService, listen string) {
	t.Helper()
	metricsBuildOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			metricsBuildErr = err
			return
		}
		dir, err := os.MkdirTemp("", buildDirPrefix)
		if err != nil {
			metricsBuildErr = err
			return
		}
		buildDirsMu.Lock()
		buildDirs = append(buildDirs, dir)
		buildDirsMu.Unlock()
		metricsBin, metricsBuildErr = nodesvc.BuildCommand(context.Background(), root, dir, nodesvc.MetricsPackage)
	})
	if metricsBuildErr != nil {
		t.Fatal(metricsBuildErr)
	}
	logPath := filepath.Join(t.TempDir(), "probeshim-metrics.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := c.Rig.Command(context.Background(), metricsBin, "--config", svc.ConfigFile(), "--kubeconfig", svc.Kubeconfig(),
		"--upstream", svc.MetricsAddress(), "--listen", listen, "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }() // its exit shows through done; why, in its log
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("probeshim-metrics log:\n%s", logtail.Last(string(b), 40))
		}
	})
	err = WaitFor(Context(t, time.Minute), 30*time.Second, "probeshim-metrics listening on "+listen, func(ctx context.Context) (bool, string, error) {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			return false, "", fmt.Errorf("probeshim-metrics exited: %s", logtail.Last(string(b), 20))
		default:
		}
		conn, err := rig.DialNetNS(ctx, c.NetNSPath(), "tcp", listen)
		if err != nil {
			return false, err.Error(), nil
		}
		conn.Close()
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
