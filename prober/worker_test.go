// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
)

func threshold(success, failure int32) func(*corev1.Probe) {
	return func(p *corev1.Probe) { p.SuccessThreshold, p.FailureThreshold = success, failure }
}

// SEMANTICS: defaults when a field is zero: timeout 1, period 10, success 1, failure 3.
func TestDefaults(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec())})
	h.running("c1")
	w := h.worker(key("p"))
	c := w.cfg.Load()
	if c.timeout() != time.Second || c.period() != 10*time.Second || c.successThreshold() != 1 || c.failureThreshold() != 3 {
		t.Fatalf("defaults: timeout %v period %v success %d failure %d", c.timeout(), c.period(), c.successThreshold(), c.failureThreshold())
	}
	h.exec.push(ok)
	h.probe(key("p"))
	h.expect(key("p"), Success) // success threshold 1
	if c := h.exec.last(); c.timeout != time.Second || c.containerID != "c1" {
		t.Fatalf("exec call %+v, want timeout 1s in c1", c)
	}
	h.exec.push(fail, fail, fail)
	for i := 0; i < 2; i++ {
		h.probe(key("p"))
		h.expect(key("p"), Success)
	}
	h.probe(key("p"))
	h.expect(key("p"), Failure) // failure threshold 3
}

// SEMANTICS: thresholds count consecutive identical results; published only
// when the run reaches failureThreshold / successThreshold.
func TestThresholds(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec(threshold(3, 3)))})
	h.running("c1")
	k := key("p")

	step := func(o execOutcome, want Result, published bool) {
		t.Helper()
		h.exec.push(o)
		h.probe(k)
		if !published {
			if u, ok := h.result(k); ok && u.Result != Unknown {
				t.Fatalf("published %v too early", u.Result)
			}
			return
		}
		h.expect(k, want)
	}
	// Nothing is published (beyond Unknown for the new container) until a run
	// reaches its threshold.
	step(ok, 0, false)
	step(ok, 0, false)
	step(ok, Success, true)
	// Failures: two are not enough, the third is.
	step(fail, Success, true)
	step(fail, Success, true)
	step(fail, Failure, true)
	step(fail, Failure, true)
	// A success in between breaks the run of failures and vice versa.
	step(ok, Failure, true)
	step(ok, Failure, true)
	step(fail, Failure, true)
	step(ok, Failure, true)
	step(ok, Failure, true)
	step(ok, Success, true)
	step(fail, Success, true)
	step(fail, Success, true)
	step(ok, Success, true)
	step(fail, Success, true)
	step(fail, Success, true)
	step(fail, Failure, true)
}

// SEMANTICS: initialDelaySeconds counts whole seconds from StartedAt.
func TestInitialDelay(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec(func(p *corev1.Probe) { p.InitialDelaySeconds = 10 }))})
	start := h.clock.Now().Add(-9*time.Second - 999*time.Millisecond)
	h.containers.set(podUID, ctr, ContainerStatus{ID: "c1", Running: true, StartedAt: start})
	h.exec.push(ok)
	h.probe(key("p"))
	if n := h.exec.count(); n != 0 {
		t.Fatalf("probed %d times 9.999s after start with a 10s initial delay", n)
	}
	h.expect(key("p"), Unknown)
	// Unknown says why (issue 32): never an empty message.
	if u, _ := h.result(key("p")); u.Message != NoResultYet || u.Reason != "" {
		t.Fatalf("a new container inside its initial delay: message %q, reason %q; want %q", u.Message, u.Reason, NoResultYet)
	}
	h.clock.Step(time.Millisecond)
	h.probe(key("p"))
	if n := h.exec.count(); n != 1 {
		t.Fatalf("probed %d times at 10s, want 1", n)
	}
	h.expect(key("p"), Success)

	// A zero StartedAt must not overflow into "not yet".
	h.containers.set(podUID, ctr, ContainerStatus{ID: "c1", Running: true})
	h.probe(key("p"))
	if n := h.exec.count(); n != 2 {
		t.Fatalf("zero StartedAt: probed %d times, want 2", n)
	}
}

// SEMANTICS: new container ID: forget the old result, report Unknown until
// the new container has a result.
func TestContainerRestart(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 3), func(p *corev1.Probe) { p.InitialDelaySeconds = 5 }))})
	h.containers.set(podUID, ctr, ContainerStatus{ID: "c1", Running: true, StartedAt: h.clock.Now().Add(-time.Minute)})
	k := key("p")
	h.exec.push(ok, fail, fail, fail)
	h.probe(k)
	h.expect(k, Success)
	h.probe(k)
	h.probe(k) // two failures: one short of the threshold

	h.running("c2") // restarted, inside its initial delay
	h.probe(k)
	h.expect(k, Unknown)
	if u, _ := h.result(k); u.Message != "container restarted" {
		t.Fatalf("message %q", u.Message)
	}
	h.clock.Step(5 * time.Second)
	h.probe(k) // the old run of failures must not carry over
	h.expect(k, Unknown)
	h.probe(k)
	h.expect(k, Unknown)
	h.probe(k)
	h.expect(k, Failure)
	if c := h.exec.last(); c.containerID != "c2" {
		t.Fatalf("probed %q, want the new container", c.containerID)
	}
}

// Container not running: Unknown for that container, at once, never Failure.
// This departs from SEMANTICS.md (and the kubelet, which reports Failure and
// then restarts by restartPolicy anyway): an exit is the kubelet's to handle,
// and only a real probe failure may set a condition False, emit a probe-failed
// event or make the decider restart a container (docs/concepts/probe-states.md).
func TestContainerNotRunningIsUnknown(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 3)))})
	k := key("p")
	h.probe(k) // no such container yet: wait, publish nothing
	h.expectNone(k)

	h.running("c1")
	h.exec.push(ok, fail, fail)
	h.probe(k)
	h.expect(k, Success)
	h.probe(k)
	h.probe(k) // two failures: one short of the threshold
	h.stopped("c1")
	h.probe(k)
	h.expectMessage(k, Unknown, "container is not running") // at once, not after three, and not Failure
	if n := h.exec.count(); n != 3 {
		t.Fatalf("probed a stopped container: %d calls", n)
	}
	h.probe(k) // it stays Unknown for as long as it is stopped
	h.expect(k, Unknown)
	if got := counterValue(t, h.reg, "failed"); got != 2 {
		t.Fatalf("not running counted as a probe: failed %v, want the 2 real ones", got)
	}

	// Started again under the same ID (a runtime that restarts in place): the
	// failures before the exit measured another process and do not carry over.
	h.running("c1")
	h.exec.push(fail)
	h.probe(k)
	h.expect(k, Unknown)
}

// A container that exits while it is being probed: the probe's failure (a
// refused connection, a killed exec) is the exit's, not a result.
func TestContainerExitDuringProbeIsUnknown(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 1)))})
	k := key("p")
	h.running("c1")
	h.exec.push(ok)
	h.probe(k)
	h.expect(k, Success)

	h.exec.push(fail)
	h.exec.setHook(func(context.Context) { h.stopped("c1") })
	h.probe(k)
	h.expectMessage(k, Unknown, "container is not running")

	// Replaced by a new container mid-probe: the result is discarded too, and
	// the new container is Unknown until it has results of its own.
	h.running("c2")
	h.exec.push(ok)
	h.exec.setHook(nil)
	h.probe(k)
	h.expect(k, Success)
	h.exec.push(fail)
	h.exec.setHook(func(context.Context) { h.running("c3") })
	h.probe(k)
	h.expect(k, Success) // c2's last word stands until c3 is seen
	h.exec.setHook(nil)
	h.probe(k)
	h.expect(k, Failure) // c3's own failure, threshold 1
	if c := h.exec.last(); c.containerID != "c3" {
		t.Fatalf("probed %q, want c3", c.containerID)
	}
	if got := counterValue(t, h.reg, "failed"); got != 1 {
		t.Fatalf("failed count %v, want only c3's", got)
	}
}

// A restarted container that is created but not started yet has no result:
// Unknown, not Failure, so a restart never reads as a failed probe.
func TestNewContainerNotStartedIsUnknown(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 1)))})
	k := key("p")
	h.running("c1")
	h.exec.push(ok)
	h.probe(k)
	h.expect(k, Success)
	h.containers.set(podUID, ctr, ContainerStatus{ID: "c2"}) // created, never started
	h.probe(k)
	h.expect(k, Unknown)
	h.running("c2")
	h.exec.push(ok)
	h.probe(k)
	h.expect(k, Success)
}

// SEMANTICS: a probe error is discarded: no result, no threshold counting.
func TestProbeErrorDiscarded(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 3)))})
	h.running("c1")
	k := key("p")
	h.exec.push(ok, fail, fail, oops, oops, fail)
	h.probe(k)
	h.expect(k, Success)
	for i := 0; i < 4; i++ { // fail, fail, error, error
		h.probe(k)
		h.expect(k, Success)
	}
	h.probe(k) // third failure: the errors neither broke nor extended the run
	h.expect(k, Failure)
	if got := counterValue(t, h.reg, "failed"); got != 3 {
		t.Fatalf("failed count %v, want 3 (errors not counted)", got)
	}
}

// SEMANTICS: a probe error is never silent: while nothing else is known, the state says why the
// probe does not run (a command that does not exist never yields a result), its reason and the
// error's text, instead of a bare Unknown; a result, once there is one, replaces it. Every error
// is counted by reason.
func TestProbeErrorSaysWhyWhileUnknown(t *testing.T) {
	h := newHarness(t, WithProbeTypes("custom"))
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 1)))})
	h.running("c1")
	k := key("p")
	notFound := execOutcome{err: errors.New(`failed to exec in container: OCI runtime exec failed: exec: "idle-check": executable file not found in $PATH`)}
	h.exec.push(notFound)
	h.probe(k)
	h.expectMessage(k, Unknown, `failed to exec in container: OCI runtime exec failed: exec: "idle-check": executable file not found in $PATH`)
	if u, _ := h.result(k); !u.Errored || u.Reason != ReasonCommandNotFound {
		t.Errorf("the error's Unknown: Errored %t, reason %q; want Errored, %s", u.Errored, u.Reason, ReasonCommandNotFound)
	}
	h.exec.push(execOutcome{err: errors.New("open /proc/self/fd/3: permission denied")})
	h.probe(k)
	h.expectMessage(k, Unknown, "open /proc/self/fd/3: permission denied")
	if u, _ := h.result(k); u.Reason != ReasonPermissionDenied {
		t.Errorf("reason %q, want %s", u.Reason, ReasonPermissionDenied)
	}
	h.exec.push(ok)
	h.probe(k)
	h.expect(k, Success)
	if u, _ := h.result(k); u.Errored || u.Reason != "" {
		t.Errorf("a result marked as an error: Errored %t, reason %q", u.Errored, u.Reason)
	}
	// Once there is a result the error stands behind it, but it is still counted.
	h.exec.push(notFound)
	h.probe(k)
	h.expect(k, Success)
	got := errorCounts(t, h.reg)
	if got["custom/"+ReasonCommandNotFound] != 2 || got["custom/"+ReasonPermissionDenied] != 1 {
		t.Errorf("probeshim_probe_errors_total = %v, want CommandNotFound 2, PermissionDenied 1", got)
	}
}

// SEMANTICS: spec changes (timeout, handler, thresholds) apply without a restart.
func TestLiveSpecUpdate(t *testing.T) {
	h := newHarness(t)
	d := desired("p", execSpec(threshold(1, 2)))
	h.m.Sync([]Desired{d})
	h.running("c1")
	k := key("p")
	w := h.worker(k)
	h.exec.push(fail)
	h.probe(k)

	d.Spec.TimeoutSeconds = 7
	h.m.Sync([]Desired{d})
	if h.worker(k) != w {
		t.Fatal("spec update replaced the worker")
	}
	h.probe(k)
	if c := h.exec.last(); c.timeout != 7*time.Second {
		t.Fatalf("timeout %v, want 7s", c.timeout)
	}
	h.expect(k, Failure) // second failure: same handler, the run went on

	d.Spec.Exec = &corev1.ExecAction{Command: []string{"check", "v2"}}
	d.Spec.FailureThreshold = 3
	h.m.Sync([]Desired{d})
	h.exec.push(ok)
	h.probe(k)
	if c := h.exec.last(); strings.Join(c.cmd, " ") != "check v2" {
		t.Fatalf("command %q, want the new one", c.cmd)
	}
	h.expect(k, Success)

	// The caller's spec is copied: mutating it later changes nothing.
	d.Spec.Exec.Command[1] = "mutated"
	h.probe(k)
	if c := h.exec.last(); c.cmd[1] != "v2" {
		t.Fatalf("worker shares the caller's spec: %q", c.cmd)
	}

	// A new handler starts a new run of results.
	h.exec.push(fail, fail, fail)
	h.probe(k)
	h.probe(k)
	d.Spec.Exec = &corev1.ExecAction{Command: []string{"check", "v3"}}
	h.m.Sync([]Desired{d})
	h.probe(k)
	h.expect(k, Success)
}

// DESIGN: two probes on one container never collide.
func TestTwoProbesOneContainer(t *testing.T) {
	h := newHarness(t)
	a := desired("a", execSpec())
	b := desired("b", execSpec(func(p *corev1.Probe) { p.Exec.Command = []string{"false"} }))
	h.m.Sync([]Desired{a, b})
	h.running("c1")
	h.m.exec = ExecerFunc(func(cmd []string) ExecResult {
		if cmd[0] == "false" {
			return ExecResult{ExitCode: 1}
		}
		return ExecResult{}
	})
	for i := 0; i < 3; i++ {
		h.probe(key("a"))
		h.probe(key("b"))
	}
	h.expect(key("a"), Success)
	h.expect(key("b"), Failure)
}

// ExecerFunc is a test Execer from a function of the command.
type ExecerFunc func(cmd []string) ExecResult

func (f ExecerFunc) Exec(_ context.Context, _ string, cmd []string, _ time.Duration) (ExecResult, error) {
	return f(cmd), nil
}

func TestMessageCapped(t *testing.T) {
	h := newHarness(t)
	h.m.Sync([]Desired{desired("p", execSpec())})
	h.running("c1")
	h.exec.push(outOf(0, strings.Repeat("é", 2000)))
	h.probe(key("p"))
	u, _ := h.result(key("p"))
	if len(u.Message) > MaxMessage || len(u.Message) < MaxMessage-1 || !utf8.ValidString(u.Message) {
		t.Fatalf("message of %d bytes, want <= %d on a rune boundary", len(u.Message), MaxMessage)
	}
}

func TestCapMessage(t *testing.T) {
	long := strings.Repeat("a", MaxMessage-1) + "é" // the rune straddles the cap
	cases := map[string]string{
		"":                           "",
		"fine":                       "fine",
		"bad \xff byte":              "bad \uFFFD byte",
		long:                         strings.Repeat("a", MaxMessage-1),
		strings.Repeat("\xff", 2000): "\uFFFD", // a run of bad bytes becomes one replacement
	}
	for in, want := range cases {
		if got := capMessage(in); got != want {
			t.Errorf("capMessage(%.20q) = %.20q (%d bytes), want %.20q (%d bytes)", in, got, len(got), want, len(want))
		}
	}
}

// At the default level, the only per-probe record is one warning for each run of probe errors
// on a running container: results and their changes are not logged.
func TestQuietAtInfo(t *testing.T) {
	var buf strings.Builder
	h := newHarness(t, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 1)))})
	h.running("c1")
	h.exec.push(ok, fail, oops, oops, oops, ok, oops)
	for i := 0; i < 7; i++ {
		h.probe(key("p"))
	}
	h.running("c2")
	h.probe(key("p"))
	lines := slices.Collect(strings.Lines(buf.String()))
	if len(lines) != 2 {
		t.Fatalf("logged %d records at Info, want 2 (one per run of errors):\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "probe error") {
			t.Errorf("logged at Info: %s", l)
		}
	}
}

// The warnings of probe errors are bounded for the whole engine: with the runtime away every
// probe errs at once.
func TestProbeErrorWarningsBounded(t *testing.T) {
	var buf strings.Builder
	h := newHarness(t, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	var ds []Desired
	for i := range 3 * errorLogBurst {
		ds = append(ds, desired(fmt.Sprint("p", i), execSpec(threshold(1, 1))))
	}
	h.m.Sync(ds)
	h.running("c1")
	for _, d := range ds {
		h.exec.push(oops)
		h.probe(d.Key)
	}
	if n := strings.Count(buf.String(), "probe error"); n != errorLogBurst {
		t.Fatalf("%d warnings for %d probes erring at once, want the budget's %d", n, len(ds), errorLogBurst)
	}
}

// At Debug level every per-probe record carries the probe's identity as
// structured fields, whatever handler the caller gives the engine.
func TestDebugLogFields(t *testing.T) {
	var buf strings.Builder
	h := newHarness(t, WithLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	h.m.Sync([]Desired{desired("p", execSpec(threshold(1, 1)))})
	h.running("c1")
	h.exec.push(fail, oops, oops)
	for range 3 {
		h.probe(key("p"))
	}

	want := map[string]map[string]any{
		"probe result changed Failure":                               {"result": Failure.String(), "message": "bad"},
		"probe error: the result is discarded until a run completes": {"level": "WARN", "error": context.Canceled.Error()},
		"probe error, result discarded":                              {"error": context.Canceled.Error()},
	}
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not one JSON record: %q: %v", line, err)
		}
		id, _ := rec["msg"].(string)
		if r, ok := rec["result"].(string); ok {
			id += " " + r
		}
		extra, ok := want[id]
		if !ok {
			continue
		}
		delete(want, id)
		fields := map[string]any{"level": "DEBUG", "namespace": "ns", "pod": "pod", "container": ctr, "probe": "p"}
		maps.Copy(fields, extra)
		for k, v := range fields {
			if rec[k] != v {
				t.Errorf("%q: %s = %v, want %v (record %s)", rec["msg"], k, rec[k], v, line)
			}
		}
	}
	for msg := range want {
		t.Errorf("no record %q in:\n%s", msg, buf.String())
	}
}
