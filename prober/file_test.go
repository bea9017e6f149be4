// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// fakeFiles answers ReadFile with out and err, and records the calls.
type fakeFiles struct {
	mu    sync.Mutex
	out   []byte
	err   error
	hook  func(ctx context.Context)
	calls []string
}

func (f *fakeFiles) ReadFile(ctx context.Context, containerID, path string, limit int, timeout time.Duration) ([]byte, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%s:%s:%d:%s", containerID, path, limit, timeout))
	out, err, hook := f.out, f.err, f.hook
	f.mu.Unlock()
	if hook != nil {
		hook(ctx)
	}
	return out, err
}

func catProbe(path string) Desired {
	d := desired("p", execSpec(func(p *corev1.Probe) { p.Exec.Command = []string{"cat", path} }))
	d.ReadFile = path
	return d
}

// An exec-free probe is read, never run: the content is the message as cat's output would be,
// an unreadable file a failure with the reader's text, other errors probe errors.
func TestFileProbe(t *testing.T) {
	big := strings.Repeat("x", MaxOutput+100)
	unreadable := fmt.Errorf("%w: cat: /tmp/idle: No such file or directory", ErrFileUnreadable)
	cases := []struct {
		name    string
		out     string
		err     error
		want    Result
		msg     string
		wantErr bool
	}{
		{"content", "idle\n", nil, Success, "idle\n", false},
		{"empty file", "", nil, Success, "", false},
		{"capped like exec output", big, nil, Success, big[:MaxOutput], false},
		{"unreadable", "", unreadable, Failure, unreadable.Error(), false},
		{"timeout", "", fmt.Errorf("read: %w", ErrExecTimeout), Failure, "command timed out after 1s", false},
		{"container gone", "", errors.New("no such container"), Unknown, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := &fakeFiles{out: []byte(tc.out), err: tc.err}
			h := newHarness(t, WithFileReader(files))
			r, msg, err := runOnce(t, h.m, catProbe("/tmp/idle"))
			if (err != nil) != tc.wantErr || r != tc.want || msg != tc.msg {
				t.Fatalf("got %v %q %v, want %v %q err=%v", r, trunc(msg), err, tc.want, trunc(tc.msg), tc.wantErr)
			}
			if n := h.exec.count(); n != 0 {
				t.Fatalf("%d execs for an exec-free probe", n)
			}
			if want := "c1:/tmp/idle:10240:1s"; len(files.calls) != 1 || files.calls[0] != want {
				t.Fatalf("reads %v, want [%s]", files.calls, want)
			}
		})
	}
}

// A reader that ignores its timeout is cut off by the engine: a failure, as for exec.
func TestFileProbeTimeoutBackstop(t *testing.T) {
	files := &fakeFiles{hook: func(ctx context.Context) { <-ctx.Done() }, err: context.DeadlineExceeded}
	h := newHarness(t, WithFileReader(files))
	h.m.execGrace = 10 * time.Millisecond
	r, msg, err := h.m.probeFile(context.Background(), "c1", "/tmp/idle", []string{"cat", "/tmp/idle"}, time.Millisecond)
	if err != nil || r != Failure || !strings.Contains(msg, "timed out") {
		t.Fatalf("got %v %q %v", r, msg, err)
	}
}

// Without a FileReader, and for a probe without ReadFile, the command runs.
func TestFileProbeFallsBackToExec(t *testing.T) {
	h := newHarness(t)
	h.exec.push(outOf(0, "ran"))
	if r, msg, err := runOnce(t, h.m, catProbe("/tmp/idle")); err != nil || r != Success || msg != "ran" {
		t.Fatalf("without a reader: %v %q %v", r, msg, err)
	}
	files := &fakeFiles{out: []byte("read")}
	h = newHarness(t, WithFileReader(files))
	h.exec.push(outOf(0, "ran"))
	d := catProbe("/tmp/idle")
	d.ReadFile = ""
	if r, msg, err := runOnce(t, h.m, d); err != nil || r != Success || msg != "ran" || len(files.calls) != 0 {
		t.Fatalf("not exec-free: %v %q %v, reads %v", r, msg, err, files.calls)
	}
}

// Switching a running probe between exec and exec-free is a new check: its run of results
// starts afresh, and the next probe reads instead of running.
func TestFileProbeSpecChange(t *testing.T) {
	files := &fakeFiles{out: []byte("read")}
	h := newHarness(t, WithFileReader(files))
	d := catProbe("/tmp/idle")
	d.ReadFile = ""
	h.m.Sync([]Desired{d})
	old := h.m.workers[d.Key].cfg.Load()
	d.ReadFile = "/tmp/idle"
	h.m.Sync([]Desired{d})
	cfg := h.m.workers[d.Key].cfg.Load()
	if cfg == old || cfg.readFile != "/tmp/idle" || cfg.gen == old.gen {
		t.Fatalf("config after the switch: readFile %q gen %d (was %d)", cfg.readFile, cfg.gen, old.gen)
	}
}

// A reader that cannot read as the container's user here hands the probe back to the exec.
func TestFileProbeUnsupportedRunsTheCommand(t *testing.T) {
	files := &fakeFiles{err: fmt.Errorf("%w: no CAP_SETUID", ErrReadUnsupported)}
	h := newHarness(t, WithFileReader(files))
	h.exec.push(outOf(0, "ran"))
	r, msg, err := runOnce(t, h.m, catProbe("/tmp/idle"))
	if err != nil || r != Success || msg != "ran" {
		t.Fatalf("got %v %q %v, want the exec's result", r, msg, err)
	}
	if got := h.exec.last().cmd; len(got) != 2 || got[0] != "cat" || got[1] != "/tmp/idle" {
		t.Fatalf("ran %q, want the probe's command", got)
	}
}
