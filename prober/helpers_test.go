// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type fakeContainers struct {
	mu sync.Mutex
	m  map[[2]string]ContainerStatus
}

func (f *fakeContainers) set(podUID, name string, st ContainerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[[2]string]ContainerStatus{}
	}
	f.m[[2]string{podUID, name}] = st
}

func (f *fakeContainers) Container(podUID, name string) (ContainerStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.m[[2]string{podUID, name}]
	return st, ok
}

type execCall struct {
	containerID string
	cmd         []string
	timeout     time.Duration
}

// fakeExec answers from a queue of outcomes, repeating the last one given
// when the queue is empty, and records calls.
type fakeExec struct {
	mu       sync.Mutex
	calls    []execCall
	outcomes []execOutcome
	lastOut  execOutcome
	hook     func(ctx context.Context)               // runs inside Exec, e.g. to block
	cmdHook  func(ctx context.Context, cmd []string) // the same, told the command
}

type execOutcome struct {
	res ExecResult
	err error
}

func (f *fakeExec) push(o ...execOutcome) {
	f.mu.Lock()
	f.outcomes = append(f.outcomes, o...)
	f.mu.Unlock()
}

func (f *fakeExec) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (ExecResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, execCall{id, cmd, timeout})
	if len(f.outcomes) > 0 {
		f.lastOut, f.outcomes = f.outcomes[0], f.outcomes[1:]
	}
	o := f.lastOut
	hook, cmdHook := f.hook, f.cmdHook
	f.mu.Unlock()
	if hook != nil {
		hook(ctx)
	}
	if cmdHook != nil {
		cmdHook(ctx, cmd)
	}
	return o.res, o.err
}

func (f *fakeExec) setHook(h func(ctx context.Context)) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *fakeExec) setCmdHook(h func(ctx context.Context, cmd []string)) {
	f.mu.Lock()
	f.cmdHook = h
	f.mu.Unlock()
}

func (f *fakeExec) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeExec) last() execCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[len(f.calls)-1]
}

var (
	ok    = execOutcome{res: ExecResult{ExitCode: 0, Output: []byte("ok")}}
	fail  = execOutcome{res: ExecResult{ExitCode: 1, Output: []byte("bad")}}
	oops  = execOutcome{err: context.Canceled} // a probe error, not a result
	outOf = func(code int, out string) execOutcome {
		return execOutcome{res: ExecResult{ExitCode: code, Output: []byte(out)}}
	}
)

type harness struct {
	t          *testing.T
	clock      *testingclock.FakeClock
	containers *fakeContainers
	exec       *fakeExec
	reg        *prometheus.Registry
	m          *Manager
}

func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	h := &harness{
		t:          t,
		clock:      testingclock.NewFakeClock(t0),
		containers: &fakeContainers{},
		exec:       &fakeExec{},
		reg:        prometheus.NewRegistry(),
	}
	// Debug level exercises the debug paths.
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	all := append([]Option{WithClock(h.clock), WithExecer(h.exec), WithRegisterer(h.reg), WithPodRegisterer(h.reg), WithLogger(log)}, opts...)
	m, err := NewManager(h.containers, all...)
	if err != nil {
		t.Fatal(err)
	}
	m.jitter = func() float64 { return 0 }
	h.m = m
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

const (
	podUID = "uid-1"
	ctr    = "app"
)

func execSpec(mod ...func(*corev1.Probe)) corev1.Probe {
	p := corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	for _, f := range mod {
		f(&p)
	}
	return p
}

func desired(probe string, spec corev1.Probe) Desired {
	return Desired{
		Key:       Key{PodUID: podUID, Container: ctr, Probe: probe},
		Pod:       PodRef{UID: podUID, Namespace: "ns", Name: "pod", IP: "127.0.0.1"},
		Spec:      spec,
		ProbeType: "custom",
	}
}

func key(probe string) Key { return Key{PodUID: podUID, Container: ctr, Probe: probe} }

// running marks the container running since t0 with the given ID.
func (h *harness) running(id string) {
	h.containers.set(podUID, ctr, ContainerStatus{ID: id, Running: true, StartedAt: h.clock.Now()})
}

// stopped marks the container with the given ID as exited (it had started).
func (h *harness) stopped(id string) {
	h.containers.set(podUID, ctr, ContainerStatus{ID: id, Running: false, StartedAt: h.clock.Now()})
}

// expectMessage checks k's result is want with the message msg.
func (h *harness) expectMessage(k Key, want Result, msg string) {
	h.t.Helper()
	h.expect(k, want)
	if u, _ := h.result(k); u.Message != msg {
		h.t.Fatalf("%s: message %q, want %q", k.Probe, u.Message, msg)
	}
}

func (h *harness) worker(k Key) *worker {
	h.t.Helper()
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	w := h.m.workers[k]
	if w == nil {
		h.t.Fatalf("no worker for %v", k)
	}
	return w
}

// probe runs one tick of k's worker.
func (h *harness) probe(k Key) { h.worker(k).doProbe(context.Background(), runStart{}) }

func (h *harness) result(k Key) (Update, bool) {
	for _, u := range h.m.Snapshot() {
		if u.Key == k {
			return u, true
		}
	}
	return Update{}, false
}

func (h *harness) expect(k Key, want Result) {
	h.t.Helper()
	u, ok := h.result(k)
	if !ok {
		h.t.Fatalf("%s: no result, want %v", k.Probe, want)
	}
	if u.Result != want {
		h.t.Fatalf("%s: result %v (%q), want %v", k.Probe, u.Result, u.Message, want)
	}
}

func (h *harness) expectNone(k Key) {
	h.t.Helper()
	if u, ok := h.result(k); ok {
		h.t.Fatalf("%s: result %v, want none", k.Probe, u.Result)
	}
}

// advance moves the fake clock, starts every due worker as the scheduler
// would, and waits for those probes to finish.
func (h *harness) advance(d time.Duration) {
	h.clock.Step(d)
	h.m.dispatchDue()
	h.m.inflight.Wait()
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := poll.Until(context.Background(), 5*time.Second, what, func(context.Context) (bool, string, error) {
		return cond(), "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
