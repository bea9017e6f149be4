// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/netns"
)

// PodNetwork is what the netns package resolves pods with.
var _ netns.Resolver = (*Client)(nil).PodNetwork

func TestRealExec(t *testing.T) {
	r := realContainerd(t)
	p := r.runPod(t, false)
	id := r.runContainer(t, p, "app", 0)
	ctx := context.Background()

	res, err := r.client.Exec(ctx, id, []string{"/bin/true"}, 5*time.Second)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("true: %+v, %v", res, err)
	}
	res, err = r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 5*time.Second)
	if err != nil || res.ExitCode != 3 || string(res.Output) != "out\nerr\n" {
		t.Fatalf("exit 3: %+v (%q), %v", res, res.Output, err)
	}
	// The container's environment and working directory apply.
	res, err = r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "echo $PATH"}, 5*time.Second)
	if err != nil || strings.TrimSpace(string(res.Output)) != "/bin" {
		t.Fatalf("env: %q, %v", res.Output, err)
	}

	// Output over the cap is cut at 10 KiB and does not block the process.
	res, err = r.client.Exec(ctx, id, []string{"/bin/seq", "1", "100000"}, 10*time.Second)
	if err != nil || res.ExitCode != 0 || len(res.Output) != MaxExecOutput || !strings.HasPrefix(string(res.Output), "1\n2\n3\n") {
		t.Fatalf("big output: code %d, %d bytes, %v", res.ExitCode, len(res.Output), err)
	}

	// A command that outlives its timeout is killed, with everything it
	// started, and reported as a timeout.
	start := time.Now()
	_, err = r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "sleep 3000 & sleep 3001; echo never"}, 500*time.Millisecond)
	if !errors.Is(err, prober.ErrExecTimeout) {
		t.Fatalf("timeout: err = %v, want ErrExecTimeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("timed-out exec took %s", d)
	}
	assertNoStrays(t, r, id)

	// A cancelled context kills and removes the process too, and is not a
	// timeout.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = r.client.Exec(cctx, id, []string{"/bin/sleep", "3002"}, time.Minute)
	cancel()
	if err == nil || errors.Is(err, prober.ErrExecTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled exec: %v", err)
	}
	assertNoStrays(t, r, id)

	if _, err := r.client.Exec(ctx, "no-such-container", []string{"/bin/true"}, time.Second); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing container: %v, want ErrNotFound", err)
	}

	// Stopped container: not found (no task), also through the cache.
	if err := r.client.StopContainer(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Exec(ctx, id, []string{"/bin/true"}, time.Second); !errors.Is(err, ErrNotFound) {
		t.Fatalf("exec in a stopped container: %v, want ErrNotFound", err)
	}
}

// assertNoStrays checks that only the container's own process is left in
// it and that no exec process remains registered with containerd.
func assertNoStrays(t *testing.T, r *rig, id string) {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), DefaultNamespace)
	ctr, err := r.ctd.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = poll.Until(ctx, 3*time.Second, "only the container's own process left", func(ctx context.Context) (bool, string, error) {
		pids, err := task.Pids(ctx)
		if err != nil {
			return false, "", err
		}
		var ps []string
		for _, p := range pids {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.Pid))
			ps = append(ps, strings.ReplaceAll(string(b), "\x00", " "))
		}
		return len(pids) == 1, fmt.Sprintf("processes in the container: %q", ps), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRealSandboxAndNetns(t *testing.T) {
	r := realContainerd(t)
	ctx := context.Background()

	if _, err := r.client.PodSandbox(ctx, "no-such-pod"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing pod: %v, want ErrNotFound", err)
	}

	hp := r.runPod(t, true)
	sb, err := r.client.PodSandbox(ctx, hp.uid)
	if err != nil {
		t.Fatal(err)
	}
	if !sb.HostNetwork || sb.NetNSPath != "" || !sb.Ready || sb.Name != hp.name || sb.Namespace != hp.namespace || sb.ID != hp.sandboxID {
		t.Fatalf("hostNetwork sandbox: %+v", sb)
	}
	if _, host, _, err := r.client.PodNetwork(ctx, hp.uid); err != nil || !host {
		t.Fatalf("PodNetwork(hostNetwork pod) = %t, %v", host, err)
	}

	if os.Getenv("PROBESHIM_TEST_HOSTNETWORK") != "" {
		t.Skip("pod network namespaces not tested (PROBESHIM_TEST_HOSTNETWORK)")
	}
	p := r.runPod(t, false)
	sb, err = r.client.PodSandbox(ctx, p.uid)
	if err != nil {
		t.Fatal(err)
	}
	if sb.HostNetwork || sb.NetNSPath == "" || !sb.Ready {
		t.Fatalf("pod sandbox: %+v", sb)
	}
	t.Logf("pod network namespace: %s", sb.NetNSPath)
	checkInfoShapes(t, r, p.sandboxID, sb.NetNSPath)

	// A server bound to 127.0.0.1 inside the pod is reached through the
	// pod's namespace, and not from the host.
	r.runContainer(t, p, "web", 0, "/bin/httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/tmp")
	path, host, ips, err := r.client.PodNetwork(ctx, p.uid)
	if err != nil || host || path != sb.NetNSPath || len(ips) == 0 {
		t.Fatalf("PodNetwork = %q, %t, %v, %v", path, host, ips, err)
	}
	d, err := netns.NewDialer(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var conn net.Conn
	err = poll.Until(ctx, 5*time.Second, "httpd inside the pod to accept", func(ctx context.Context) (bool, string, error) {
		c, err := d.DialContext(ctx, "tcp", "127.0.0.1:8080")
		if err != nil {
			return false, err.Error(), nil
		}
		conn = c
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	buf := make([]byte, 12)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := conn.Read(buf)
	conn.Close()
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.") {
		t.Fatalf("httpd answered %q", buf[:n])
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:8080", time.Second); err == nil {
		c.Close()
		t.Log("note: something on the host listens on 127.0.0.1:8080 too")
	}

	// After the sandbox stops, its namespace is not found.
	_, _ = r.cri.StopPodSandbox(ctx, &criapi.StopPodSandboxRequest{PodSandboxId: p.sandboxID})
	if _, _, _, err := r.client.PodNetwork(ctx, p.uid); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PodNetwork of a stopped sandbox: %v, want ErrNotFound", err)
	}
	if _, err := d.DialContext(ctx, "tcp", "127.0.0.1:8080"); !errors.Is(err, netns.ErrNotFound) {
		t.Fatalf("dial into a stopped sandbox: %v, want netns.ErrNotFound", err)
	}
}

// checkInfoShapes checks both places of the verbose sandbox info that tell
// the network namespace against this containerd: runtimeSpec (all versions)
// and sandboxMetadata (2.x, 1.7's sandboxed CRI), the one 2.x may be left
// with.
func checkInfoShapes(t *testing.T, r *rig, sandboxID, want string) {
	t.Helper()
	st, err := r.cri.PodSandboxStatus(context.Background(), &criapi.PodSandboxStatusRequest{PodSandboxId: sandboxID, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]json.RawMessage
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		t.Fatalf("verbose sandbox info: %v", err)
	}
	if _, ok := info["runtimeSpec"]; !ok {
		t.Error("verbose sandbox info has no runtimeSpec")
	}
	md, ok := info["sandboxMetadata"]
	if !ok {
		t.Log("verbose sandbox info has no sandboxMetadata (containerd 1.6, and 1.7's default CRI)")
		return
	}
	only, _ := json.Marshal(map[string]json.RawMessage{"sandboxMetadata": md})
	if got := netNSPath(map[string]string{"info": string(only)}); got != want {
		t.Errorf("network namespace from sandboxMetadata alone = %q, want %q (from runtimeSpec)", got, want)
	}
}

type changeLog struct {
	mu sync.Mutex
	c  []Change
}

func (l *changeLog) add(c Change) { l.mu.Lock(); l.c = append(l.c, c); l.mu.Unlock() }
func (l *changeLog) has(c Change) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.c {
		if x == c {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, what, 5*time.Second, cond)
}

func waitForWithin(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	poll.Eventually(t, d, func() error {
		if !cond() {
			return errors.New("waiting for " + what)
		}
		return nil
	})
}

func TestRealTracker(t *testing.T) {
	r := realContainerd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A container that exists before the tracker starts is found by the
	// initial listing, with CRI's start time.
	p := r.runPod(t, false)
	id0 := r.runContainer(t, p, "app", 0)
	st0, err := r.cri.ContainerStatus(ctx, &criapi.ContainerStatusRequest{ContainerId: id0})
	if err != nil {
		t.Fatal(err)
	}

	changes := &changeLog{}
	tr := NewTracker(r.client, changes.add)
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case <-tr.Synced():
	case <-time.After(10 * time.Second):
		t.Fatalf("tracker never synced: %v", tr.Healthy())
	}
	if err := tr.Healthy(); err != nil {
		t.Fatal(err)
	}
	got, ok := tr.Container(p.uid, "app")
	if !ok || got.ID != id0 || !got.Running || got.StartedAt.UnixNano() != st0.GetStatus().GetStartedAt() {
		t.Fatalf("Container after sync = %+v, %t", got, ok)
	}
	if _, ok := tr.Container(p.uid, "other"); ok {
		t.Fatal("unknown container found")
	}

	// The container stops: seen from the exit event at once.
	stopAt := time.Now()
	if err := r.client.StopContainer(ctx, id0, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stop", func() bool { c, _ := tr.Container(p.uid, "app"); return !c.Running })
	t.Logf("stop seen %s after StopContainer was called", time.Since(stopAt))
	if !changes.has(Change{PodUID: p.uid, Container: "app"}) {
		t.Fatal("no change reported for the stop")
	}

	// The kubelet restarts it as a new container: the new ID is current and
	// running, with a start time near CRI's.
	id1 := r.runContainer(t, p, "app", 1)
	waitFor(t, "restart", func() bool { c, _ := tr.Container(p.uid, "app"); return c.ID == id1 && c.Running })
	got, _ = tr.Container(p.uid, "app")
	st1, _ := r.cri.ContainerStatus(ctx, &criapi.ContainerStatusRequest{ContainerId: id1})
	if d := got.StartedAt.Sub(time.Unix(0, st1.GetStatus().GetStartedAt())).Abs(); d > time.Second {
		t.Fatalf("StartedAt %s is %s away from CRI's", got.StartedAt, d)
	}

	// A second container in the pod is tracked separately.
	r.runContainer(t, p, "side", 0)
	waitFor(t, "sidecar", func() bool { c, ok := tr.Container(p.uid, "side"); return ok && c.Running })

	// Removing the pod removes its containers and reports the sandbox.
	_, _ = r.cri.StopPodSandbox(ctx, &criapi.StopPodSandboxRequest{PodSandboxId: p.sandboxID})
	_, _ = r.cri.RemovePodSandbox(ctx, &criapi.RemovePodSandboxRequest{PodSandboxId: p.sandboxID})
	waitFor(t, "removal", func() bool {
		_, a := tr.Container(p.uid, "app")
		_, s := tr.Container(p.uid, "side")
		return !a && !s
	})
	waitFor(t, "sandbox change", func() bool { return changes.has(Change{PodUID: p.uid}) })
}

func TestRealTrackerReconnect(t *testing.T) {
	ctl := os.Getenv("PROBESHIM_CONTAINERD_CTL")
	if ctl == "" {
		t.Skip("set PROBESHIM_CONTAINERD_CTL to a command that takes stop or start for the containerd under test")
	}
	run := func(arg string) {
		if out, err := exec.Command("sh", "-c", ctl+" "+arg).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", ctl, arg, err, out)
		}
	}
	r := realContainerd(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := r.runPod(t, false)
	id := r.runContainer(t, p, "app", 0)
	id2 := r.runContainer(t, p, "other", 0)

	tr := NewTracker(r.client, nil)
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-tr.Synced()
	// Prime the exec cache, so the exec after the restart goes through the
	// reconnected client.
	if _, err := r.client.Exec(ctx, id, []string{"/bin/true"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c2, _ := tr.Container(p.uid, "other")
	pid := containerPid(t, r, id2)

	run("stop")
	startedAgain := false
	defer func() {
		if !startedAgain {
			run("start")
		}
	}()
	waitFor(t, "the tracker to notice", func() bool { return tr.Healthy() != nil })
	if _, err := r.client.Exec(ctx, id, []string{"/bin/true"}, time.Second); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("exec while containerd is down: %v, want ErrUnavailable", err)
	}
	// Answers from memory go on while the runtime is away.
	if c, ok := tr.Container(p.uid, "other"); !ok || c != c2 {
		t.Fatalf("state lost while containerd is down: %+v", c)
	}
	// A container dies while containerd is away.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run("start")
	startedAgain = true
	// The tracker's retries back off to 10 s while containerd is down (and
	// containerd 2.x takes seconds to start): allow one full step.
	waitForWithin(t, "reconnect", 15*time.Second, func() bool { return tr.Healthy() == nil })
	waitFor(t, "the death during the outage", func() bool { c, _ := tr.Container(p.uid, "other"); return !c.Running })
	if c, _ := tr.Container(p.uid, "app"); c.ID != id || !c.Running {
		t.Fatalf("after reconnect: %+v", c)
	}
	if _, err := r.client.Exec(ctx, id, []string{"/bin/true"}, 5*time.Second); err != nil {
		t.Fatalf("exec after reconnect: %v", err)
	}
	if err := r.client.StopContainer(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stop after reconnect", func() bool { c, _ := tr.Container(p.uid, "app"); return !c.Running })
}

func containerPid(t *testing.T, r *rig, id string) int {
	t.Helper()
	ctx := namespaces.WithNamespace(context.Background(), DefaultNamespace)
	ctr, err := r.ctd.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return int(task.Pid())
}

// A command that exits but leaves a child holding its stdout open returns
// with its exit code once the timeout allows no more waiting for output; it
// does not hang, and the result is not a timeout. The delete of the exec
// process goes on after Exec returned: containerd's shim holds it while the
// output is open, 2 s in 1.6 and 10 s in 1.7.35 and 2.x, for CRI's
// ExecSync too. Close waits for it.
func TestRealExecBackgroundChild(t *testing.T) {
	r := realContainerd(t)
	p := r.runPod(t, false)
	id := r.runContainer(t, p, "app", 0)
	start := time.Now()
	res, err := r.client.Exec(context.Background(), id, []string{"/bin/sh", "-c", "sleep 30 & echo hi; exit 4"}, time.Second)
	d := time.Since(start)
	if err != nil || res.ExitCode != 4 || string(res.Output) != "hi\n" {
		t.Fatalf("exec = %+v (%q), %v", res, res.Output, err)
	}
	if d > 2500*time.Millisecond {
		t.Fatalf("took %s", d)
	}
	t.Logf("returned after %s", d)
	done := make(chan struct{})
	go func() { r.client.deletes.Wait(); close(done) }()
	select {
	case <-done:
		t.Logf("exec process deleted after %s", time.Since(start))
	case <-time.After(heldDeleteTimeout + 5*time.Second):
		t.Fatal("the exec process's delete never finished")
	}
}

// With a Tracker following containerd's events, as in the service, an exec
// learns its exit from the stream; results, the output cap and the timeout
// kill are as without.
func TestRealExecExitFromEvents(t *testing.T) {
	r := realContainerd(t)
	p := r.runPod(t, false)
	id := r.runContainer(t, p, "app", 0)
	ctx := followEvents(t, r)
	delivered := func() int {
		r.client.exits.mu.Lock()
		defer r.client.exits.mu.Unlock()
		return r.client.exits.delivered
	}

	res, err := r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 5*time.Second)
	if err != nil || res.ExitCode != 3 || string(res.Output) != "out\nerr\n" {
		t.Fatalf("exit 3: %+v (%q), %v", res, res.Output, err)
	}
	if n := delivered(); n != 1 {
		t.Fatalf("%d exits came from the event stream, want 1", n)
	}
	res, err = r.client.Exec(ctx, id, []string{"/bin/seq", "1", "100000"}, 10*time.Second)
	if err != nil || res.ExitCode != 0 || len(res.Output) != MaxExecOutput {
		t.Fatalf("big output: code %d, %d bytes, %v", res.ExitCode, len(res.Output), err)
	}
	_, err = r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "sleep 3000 & sleep 3001"}, 500*time.Millisecond)
	if !errors.Is(err, prober.ErrExecTimeout) {
		t.Fatalf("timeout: err = %v, want ErrExecTimeout", err)
	}
	assertNoStrays(t, r, id)
	if n := delivered(); n != 3 {
		t.Fatalf("%d exits came from the event stream, want 3", n)
	}
}

// followEvents runs a Tracker on r's client, as the service does, until the test ends, and
// returns a context that ends with it.
func followEvents(t testing.TB, r *rig) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := NewTracker(r.client, nil)
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-tr.Synced():
	case <-time.After(time.Minute):
		t.Fatal("tracker not synced within a minute")
	}
	return ctx
}

// An exec killed because its container died is no result: containerd publishes the
// container's exit after the exits of the execs it killed (137), and the exec waits for it.
// A command killed by SIGKILL in a container that lives on is a result, code 137.
func TestRealExecDiesWithContainer(t *testing.T) {
	r := realContainerd(t)
	p := r.runPod(t, false)
	ctx := followEvents(t, r)

	id := r.runContainer(t, p, "app", 0)
	res, err := r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "kill -9 $$"}, 5*time.Second)
	if err != nil || res.ExitCode != sigkillExit {
		t.Fatalf("a command killing itself: %+v, %v; want exit code %d", res, err, sigkillExit)
	}

	type outcome struct {
		res prober.ExecResult
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		res, err := r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "echo >/tmp/started; sleep 60"}, 30*time.Second)
		got <- outcome{res, err}
	}()
	waitFor(t, "the exec to start", func() bool {
		res, err := r.client.Exec(ctx, id, []string{"/bin/sh", "-c", "[ -f /tmp/started ]"}, 5*time.Second)
		return err == nil && res.ExitCode == 0
	})
	if err := syscall.Kill(containerPid(t, r, id), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-got:
		if !errors.Is(o.err, errDiedWithContainer) {
			t.Fatalf("exec in a container that died: %+v, %v; want %v", o.res, o.err, errDiedWithContainer)
		}
	case <-time.After(time.Minute):
		t.Fatal("the exec did not return within a minute of its container's death")
	}
}
