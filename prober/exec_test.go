// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func runOnce(t *testing.T, m *Manager, d Desired) (Result, string, error) {
	t.Helper()
	return m.runProbe(context.Background(), newProbeConfig(&d), "c1")
}

// SEMANTICS Exec: exit 0 = Success, non-zero = Failure; timeout = Failure;
// output stdout then stderr capped at 10 KiB; errors are probe errors.
func TestExecProbe(t *testing.T) {
	big := strings.Repeat("x", MaxOutput+100)
	cases := []struct {
		name    string
		out     execOutcome
		want    Result
		msg     string
		wantErr bool
	}{
		{"exit 0", outOf(0, "fine"), Success, "fine", false},
		{"exit 1", outOf(1, "broken"), Failure, "broken", false},
		{"exit 137 without output", outOf(137, ""), Failure, "command exited with code 137", false},
		{"output capped", outOf(0, big), Success, big[:MaxOutput], false},
		{"timeout", execOutcome{err: ErrExecTimeout}, Failure, "command timed out after 1s", false},
		{"wrapped timeout", execOutcome{err: fmt.Errorf("exec in c1: %w", ErrExecTimeout)}, Failure, "command timed out after 1s", false},
		{"runtime error", execOutcome{err: errors.New("containerd unreachable")}, Unknown, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.exec.push(tc.out)
			r, msg, err := runOnce(t, h.m, desired("p", execSpec()))
			if (err != nil) != tc.wantErr || r != tc.want || msg != tc.msg {
				t.Fatalf("got %v %q %v, want %v %q err=%v", r, trunc(msg), err, tc.want, trunc(tc.msg), tc.wantErr)
			}
		})
	}
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// An Execer that does not enforce the timeout is cut off by the engine, and
// that too is a timeout, not a probe error.
func TestExecTimeoutBackstop(t *testing.T) {
	h := newHarness(t)
	h.m.execGrace = 10 * time.Millisecond
	h.exec.hook = func(ctx context.Context) { <-ctx.Done() }
	h.exec.push(execOutcome{err: context.DeadlineExceeded})
	r, msg, err := h.m.probeExec(context.Background(), "c1", []string{"sleep", "9"}, time.Millisecond)
	if err != nil || r != Failure || !strings.Contains(msg, "timed out") {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
}

func TestExecWithoutExecer(t *testing.T) {
	m, err := NewManager(&fakeContainers{})
	if err != nil {
		t.Fatal(err)
	}
	r, msg, err := runOnce(t, m, desired("p", execSpec()))
	if err != nil || r != Failure || !strings.Contains(msg, "no exec runner") {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
	d := desired("p", execSpec(func(p *corev1.Probe) { p.Exec.Command = nil }))
	h := newHarness(t)
	if r, msg, _ := runOnce(t, h.m, d); r != Failure || msg != "exec probe has no command" {
		t.Fatalf("empty command: %v %q", r, msg)
	}
}

func TestHandlerCount(t *testing.T) {
	h := newHarness(t)
	d := desired("p", corev1.Probe{})
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Failure || !strings.Contains(msg, "exactly one handler") {
		t.Fatalf("no handler: %v %q %v", r, msg, err)
	}
	d = desired("p", execSpec(func(p *corev1.Probe) { p.TCPSocket = &corev1.TCPSocketAction{} }))
	if r, msg, _ := runOnce(t, h.m, d); r != Failure || !strings.Contains(msg, "has 2") {
		t.Fatalf("two handlers: %v %q", r, msg)
	}
}
