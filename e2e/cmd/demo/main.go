// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command demo shows probeshim working end to end on the test rig (`make demo`, `make
// demo-down`):
//
//	demo up     bring the rig up, deploy the cluster part from cluster/deploy, run the node
//	            service on its node, apply docs/examples/game-servers, flip a game server
//	            busy and idle and show what changes; the rig and the node service keep running
//	demo down   stop the node service and tear the rig down
//
// up's steps are the list in up, each a function of steps.go; the Kubernetes binaries come
// from $PROBESHIM_KUBE_BIN (make demo sets it).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/nodesvc"
	"github.com/probeshim/probeshim/e2e/rig"
	"github.com/probeshim/probeshim/shim/config"
)

// The example (docs/examples/game-servers) as the demo reads it.
const (
	exampleDir     = "docs/examples/game-servers"
	gamesNS        = "games"
	gamesSelector  = "app=gameserver"
	gamesDeploy    = "gameserver"
	container      = "server"
	labelIdle      = "gameserver-idle"
	annotationCost = "controller.kubernetes.io/pod-deletion-cost"
	conditionIdle  = "game.example.com/idle"
	// busyboxImage is what the example's Deployment runs. The rig reaches no registry outside: the
	// demo builds a static busybox image and the rig pushes it to its own registry, containerd's
	// mirror of docker.io (imagePullPolicy IfNotPresent).
	busyboxImage = "busybox:1.36"
	// healthAddr is the node service's health and metrics endpoint, inside the rig's netns.
	healthAddr = "127.0.0.1:19180"
)

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: demo up|down")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "demo: the rig needs root")
		os.Exit(1)
	}
	logf.SetLogger(logr.Discard()) // the framework's clients log nothing worth reading
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if os.Args[1] == "up" {
		err = up(ctx)
	} else {
		err = down(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// ---- up ----

// demo is what the steps of up share.
type demo struct {
	r     *rig.Rig
	c     *framework.Cluster
	svc   *nodesvc.Service // the node service, detached: it outlives the demo
	root  string           // the module's folder
	busy  string           // the game server the demo makes busy
	t0    time.Time
	step  int
	steps int
}

// step is one numbered section of up: run prints its title (d.section) and does it.
type step struct {
	name string
	run  func(context.Context) error
}

// up runs the demo's steps in order. A step that fails after the rig is up leaves it up for a
// look; `make demo-down` removes it.
func up(ctx context.Context) error {
	d := &demo{t0: time.Now()}
	steps := []step{
		{"bring the rig up", d.bringUpRig},
		{"deploy the cluster part", d.deployClusterPart},
		{"start the node service", d.startNodeService},
		{"apply the example", d.applyExample},
		{"start a match", d.startMatch},
		{"scale the game servers down", d.scaleDown},
		{"end the match", d.endMatch},
	}
	d.steps = len(steps)
	for _, s := range steps {
		if err := s.run(ctx); err != nil {
			return d.failed(fmt.Errorf("%s: %w", s.name, err))
		}
	}
	// Then, not numbered: check the shell the hints name, and print them.
	if err := d.checkShell(ctx); err != nil {
		return d.failed(err)
	}
	d.printHandHints()
	return nil
}

// section starts the next numbered step.
func (d *demo) section(title string) {
	d.step++
	fmt.Printf("\n== %d/%d  %s   [%s]\n", d.step, d.steps, title, time.Since(d.t0).Round(time.Second))
}

// failed adds to err where to look when the rig is up: it stays up. (A rig that did not come up
// was torn down by rig.Start.)
func (d *demo) failed(err error) error {
	if d.r == nil {
		return err
	}
	return fmt.Errorf("%w\n\nThe rig is still up for a look (logs in %s, node service log %s); `make demo-down` removes it", err, d.r.LogDir(), nodeServiceLog(d.r.Dir()))
}

// printf prints a line of a step, indented under its title.
func printf(format string, args ...any) { fmt.Printf("   "+format+"\n", args...) }

// demoDir holds the node service's binary, config and pid file; it is inside the rig's folder,
// so the teardown removes it.
func demoDir(rigDir string) string { return filepath.Join(rigDir, "demo") }

// nodeServiceLog is the node service's log, next to the rig's components' logs.
func nodeServiceLog(rigDir string) string { return filepath.Join(rigDir, "logs", "probeshim.log") }

// ---- down ----

func down(ctx context.Context) error {
	cfg := rig.Config{Logf: func(format string, args ...any) { fmt.Printf(format+"\n", args...) }}
	rigDir := strings.TrimSuffix(rig.StateFile(cfg), ".state.json")
	unlock, holder, err := tryLock(rigDir + ".lock")
	if err != nil {
		return err
	}
	if unlock == nil {
		return fmt.Errorf("the rig is in use by pid %s (a test run?): not tearing it down; try again when it is done", holder)
	}
	defer unlock()
	if err := nodesvc.StopDetached(demoDir(rigDir), func(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }); err != nil {
		return err
	}
	// The demo's status socket, unless a service still answers on it.
	if c, err := net.DialTimeout("unix", config.DefaultStatusSocket, time.Second); err == nil {
		c.Close()
	} else {
		_ = os.Remove(config.DefaultStatusSocket)
	}
	if err := rig.Teardown(ctx, cfg); err != nil {
		return err
	}
	if left := rig.Leftovers(cfg); len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	fmt.Println("demo: the node service is stopped and the rig is gone")
	return nil
}

// tryLock takes the rig's lock without waiting. It returns unlock == nil and the holder's pid
// when another process holds it.
func tryLock(path string) (unlock func(), holder string, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, "", err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, strings.TrimSpace(string(b)), nil
		}
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, "", nil
}
