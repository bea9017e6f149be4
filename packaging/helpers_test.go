// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package packaging

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probeshim/probeshim/internal/testkit/logtail"
	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/packaging/nspawn"
)

const unit = "probeshim.service"

// node is one booted container plus the test driving it.
type node struct {
	t   *testing.T
	ctx context.Context
	c   *nspawn.Container
}

// bootNode boots a container from the shared base with the build folder bound read-only at /pkgs.
// It is powered off and its cgroups removed when the test ends; on failure the unit's status and
// journal are logged first.
func bootNode(t *testing.T, f *fixture, name string, o nspawn.Options) *node {
	t.Helper()
	ctx := context.Background()
	console, err := os.Create(filepath.Join(f.work, name+".console.log"))
	if err != nil {
		t.Fatal(err)
	}
	o.Root, o.Name, o.Console = f.root, name, console
	o.BindRO = append(o.BindRO, f.build+":/pkgs")
	start := time.Now()
	c, err := nspawn.Boot(ctx, o)
	if err != nil {
		console.Close()
		b, _ := os.ReadFile(console.Name())
		t.Fatalf("boot %s: %v\nconsole:\n%s", name, err, logtail.Last(string(b), 30))
	}
	t.Logf("timing: %s booted to running in %s", name, time.Since(start).Round(time.Millisecond))
	n := &node{t: t, ctx: ctx, c: c}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := c.Sh(ctx, "systemctl status --no-pager -l probeshim; journalctl --no-pager -n 80 -u probeshim")
			t.Logf("%s: status and journal of probeshim:\n%s", name, out)
		}
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("teardown %s: %v", name, err)
		}
		console.Close()
		t.Logf("timing: %s torn down in %s", name, time.Since(start).Round(time.Millisecond))
	})
	return n
}

// sh runs a shell command line in the container and fails the test when it fails.
func (n *node) sh(format string, args ...any) string {
	n.t.Helper()
	out, err := n.c.Sh(n.ctx, fmt.Sprintf(format, args...))
	if err != nil {
		n.t.Fatalf("%s: %v", n.c.Name(), err)
	}
	return strings.TrimSpace(out)
}

// try runs a shell command line and returns its output and whether it succeeded.
func (n *node) try(format string, args ...any) (string, bool) {
	out, err := n.c.Sh(n.ctx, fmt.Sprintf(format, args...))
	return strings.TrimSpace(out), err == nil
}

// prop is one property of the unit as systemctl show reports it.
func (n *node) prop(name string) string {
	n.t.Helper()
	return n.sh("systemctl show -p %s --value %s", name, unit)
}

func (n *node) exists(path string) bool {
	_, ok := n.try("test -e %s", path)
	return ok
}

// eventually polls cond until it holds or timeout passes.
func (n *node) eventually(what string, timeout time.Duration, cond func() bool) {
	n.t.Helper()
	err := poll.Until(n.ctx, timeout, what, func(context.Context) (bool, string, error) {
		return cond(), "", nil
	})
	if err != nil {
		n.t.Fatalf("%s: %v", n.c.Name(), err)
	}
}

// expectRunning checks the service is enabled (when wantEnabled), active and running as a notify
// service, and returns its main PID.
func (n *node) expectRunning(wantEnabled bool) string {
	n.t.Helper()
	if wantEnabled {
		if got, _ := n.try("systemctl is-enabled %s", unit); got != "enabled" {
			n.t.Fatalf("is-enabled = %q, want enabled", got)
		}
	}
	if a, s := n.prop("ActiveState"), n.prop("SubState"); a != "active" || s != "running" {
		n.t.Fatalf("state %s/%s, want active/running", a, s)
	}
	if typ := n.prop("Type"); typ != "notify" {
		n.t.Fatalf("Type = %s, want notify", typ)
	}
	pid := n.prop("MainPID")
	if pid == "" || pid == "0" {
		n.t.Fatalf("no main PID")
	}
	return pid
}

// expectStartedOnBareNode checks the first start after an install on a node without containerd or
// a kubeconfig: the start job must have completed (READY=1) rather than timed out.
func (n *node) expectStartedOnBareNode() string {
	n.t.Helper()
	if a, r := n.prop("ActiveState"), n.prop("Result"); a != "active" {
		n.t.Fatalf("after install the service is %s (result %s), status %q: on a node without containerd "+
			"or a kubeconfig it must still send READY=1 (with STATUS= saying what it waits for) instead "+
			"of holding it back until they appear; otherwise every start times out after TimeoutStartSec, "+
			"the package install blocks that long, boot ordering waits on it and systemd restarts it in a loop",
			a, r, n.prop("StatusText"))
	}
	return n.expectRunning(true)
}

// expectStopped checks that no probeshim process is left.
func (n *node) expectStopped() {
	n.t.Helper()
	if a := n.prop("ActiveState"); a != "inactive" && a != "failed" {
		n.t.Fatalf("ActiveState = %s after stop/remove, want inactive", a)
	}
	if out, _ := n.try("for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = probeshim ] && echo ${p#/proc/}; done; true"); out != "" {
		n.t.Fatalf("probeshim processes still running: %s", out)
	}
}

// journalHas reports whether a line of the unit's journal (journalctl -o cat) contains s.
func (n *node) journalHas(s string) bool {
	n.t.Helper()
	out, _ := n.try("journalctl --no-pager -o cat -u %s | grep -cF -e %s", unit, shellQuote(s))
	return out != "" && out != "0"
}

// environ returns the environment of the service's main process.
func (n *node) environ() string {
	n.t.Helper()
	return n.sh("tr '\\0' '\\n' </proc/%s/environ", n.prop("MainPID"))
}

// journalEntries returns the unit's journal entries (journalctl -o json) matching the extra
// journalctl arguments.
func (n *node) journalEntries(args ...string) []map[string]any {
	n.t.Helper()
	out := n.sh("journalctl --no-pager -o json -u %s %s", unit, strings.Join(args, " "))
	var entries []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			entries = append(entries, e)
		}
	}
	return entries
}

// step logs how long a named step took.
func step(t *testing.T, name string, fn func()) {
	t.Helper()
	start := time.Now()
	fn()
	t.Logf("timing: %s: %s", name, time.Since(start).Round(time.Millisecond))
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return strings.TrimSpace(string(out))
}
