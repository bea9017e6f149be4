// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command rig starts and stops the test rig by hand:
//
//	rig up     bring the cluster up, print how to use it, and leave it running
//	rig down   tear it down (also whatever a killed test left behind, and the
//	           envtest etcd and kube-apiserver of killed test binaries)
//
// The Kubernetes binaries come from $PROBESHIM_KUBE_BIN (make rig-up sets it);
// PROBESHIM_RIG_NODES=2 brings up two nodes (make rig-up RIG_NODES=2).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/internal/testkit/procrecord"
)

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: rig up|down")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	cfg := rig.Config{Logf: logf}
	if v := os.Getenv("PROBESHIM_RIG_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "PROBESHIM_RIG_NODES:", err)
			os.Exit(2)
		}
		cfg.Nodes = n
	}
	start := time.Now()
	switch os.Args[1] {
	case "up":
		r, err := rig.Start(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rig up:", err)
			os.Exit(1)
		}
		var names []string
		for _, n := range r.Nodes() {
			names = append(names, n.Name())
		}
		fmt.Printf(`# rig up in %s; nodes %s, logs in %s
# The API server listens inside network namespace %s only. Enter it with:
%s
# or run single commands there, e.g.:
#   nsenter --net=%s %s/kubectl --kubeconfig %s get nodes
export KUBECONFIG=%s
export CONTAINERD_ADDRESS=%s
# tear down with: make rig-down
`, time.Since(start).Round(time.Millisecond), strings.Join(names, " "), r.LogDir(), r.NetNSPath(), r.EnterHint(),
			r.NetNSPath(), r.KubeBin(), r.AdminKubeconfig(), r.AdminKubeconfig(), r.ContainerdSocket())
	case "down":
		// What killed envtest-using test binaries recorded (internal/testkit/kubebin): cheap, and the
		// same "leave nothing behind" as the rig's own teardown.
		lines, err := procrecord.Sweep(procrecord.Dir())
		for _, l := range lines {
			fmt.Fprintln(os.Stderr, l)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rig down:", err)
		}
		failed := false
		if err := rig.Teardown(ctx, cfg); err != nil {
			fmt.Fprintln(os.Stderr, "rig down:", err)
			failed = true
		}
		// The rigs of packages that ran side by side (make e2e), when a run was killed.
		for _, name := range rig.Names() {
			if name == rig.DefaultName {
				continue
			}
			fmt.Fprintf(os.Stderr, "rig down: %s too\n", name)
			if err := rig.Teardown(ctx, rig.Config{Name: name, Logf: logf}); err != nil {
				fmt.Fprintf(os.Stderr, "rig down: %s: %v\n", name, err)
				failed = true
			}
		}
		rig.RemoveIdleLocks()
		if failed {
			os.Exit(1)
		}
	}
}
