// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Every error has a reason of the closed set: by the kind it wraps first, by runc's words only
// where the error is the runtime's text. (The shim's own errors are classified in its packages'
// tests: shim/netns, shim/runtime.)
func TestErrorReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no error", nil, ""},
		{"a refused target", fmt.Errorf("%w: probe host %q is not the pod", ErrRefused, "10.0.0.1"), ReasonTargetRefused},
		{"the namespace gone", fmt.Errorf("no dialer for pod: %w", fmt.Errorf("%w: /var/run/netns/cni-1", ErrNamespaceGone)), ReasonNetworkNamespaceGone},
		{"an exec-free read refused", fmt.Errorf("%w: cat: /proc/1/status", ErrReadRefused), ReasonExecFreeReadRefused},
		{"the runtime away, whatever its text", fmt.Errorf("exec: %w: dial unix /run/containerd/containerd.sock: connect: permission denied", ErrRuntimeUnavailable), ReasonRuntimeUnavailable},
		{"EACCES of the node's own", &os.PathError{Op: "open", Path: "/var/run/netns/x", Err: syscall.EACCES}, ReasonPermissionDenied},
		{"runc: not in $PATH", errors.New(`OCI runtime exec failed: exec failed: unable to start container process: exec: "nc": executable file not found in $PATH: unknown`), ReasonCommandNotFound},
		{"runc: a path that does not exist", errors.New(`exec: "/bin/idle-check": stat /bin/idle-check: no such file or directory`), ReasonCommandNotFound},
		{"runc: permission denied", errors.New(`OCI runtime exec failed: exec: "/tmp/check": permission denied: unknown`), ReasonPermissionDenied},
		{"a runtime's missing file is no missing command", errors.New(`failed to start io pipe copy: containerd-shim: opening file "/proc/152/fd/12" failed: open /proc/152/fd/12: no such file or directory`), ReasonRuntimeError},
		{"anything else", context.Canceled, ReasonRuntimeError},
	} {
		got := ErrorReason(tc.err)
		if got != tc.want {
			t.Errorf("%s: ErrorReason(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
		if got != "" && !slices.Contains(ErrorReasons(), got) {
			t.Errorf("%s: %q is not in ErrorReasons", tc.name, got)
		}
	}
}

// A probe error's message is the error's text, bounded, with what a late start adds after it.
func TestErrorDetailBounded(t *testing.T) {
	long := errors.New(strings.Repeat("é", maxErrorDetail)) // 2 bytes a rune: cut inside one
	note := runStart{late: 2600 * time.Millisecond, why: "the node's exec pool was full"}.note()
	got := errorDetail(long, note)
	if !strings.HasSuffix(got, "… (started 3s late: the node's exec pool was full)") || len(got) > maxErrorDetail+len("…")+len(note) {
		t.Errorf("errorDetail = %d bytes ...%q", len(got), got[max(0, len(got)-80):])
	}
	if n := (runStart{late: LateAfter}).note(); n != "" {
		t.Errorf("a start within LateAfter notes %q", n)
	}
}

// A refused target is Unknown at once with its reason, whatever was known before: nothing was
// dialled. It is counted, and it is no error a kept result could stand for.
func TestRefusedTargetIsUnknownWithItsReason(t *testing.T) {
	ln := listen(t)
	var refuse atomic.Bool
	h := newHarness(t, WithNetwork(NetworkFunc(func(PodRef) (Dialer, error) {
		if refuse.Load() {
			return nil, fmt.Errorf("%w: IP 10.0.0.9 is not the pod's", ErrRefused)
		}
		return hostDialer, nil
	})))
	port := intstr.FromInt(ln.Addr().(*net.TCPAddr).Port)
	d := desired("p", corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}})
	h.m.Sync([]Desired{d})
	h.running("c1")
	k := key("p")
	h.probe(k)
	h.expect(k, Success)
	refuse.Store(true)
	h.probe(k)
	h.expectMessage(k, Unknown, "probe refused: IP 10.0.0.9 is not the pod's")
	if u, _ := h.result(k); u.Reason != ReasonTargetRefused || u.Errored {
		t.Errorf("reason %q, Errored %t; want %s, not Errored", u.Reason, u.Errored, ReasonTargetRefused)
	}
	if got := errorCounts(t, h.reg); got["custom/"+ReasonTargetRefused] != 1 {
		t.Errorf("probeshim_probe_errors_total = %v, want TargetRefused 1", got)
	}
}

// The error counter's series of the named probe types are there at zero before any error, every
// reason of each, and so are the runs counter's, every result; another type's appear with its first
// error.
func TestErrorCounterSeriesAtZero(t *testing.T) {
	h := newHarness(t, WithProbeTypes("custom", "liveness"))
	runs := counts(t, h.reg, "probeshim_probes_total", "result")
	for _, typ := range []string{"custom", "liveness"} {
		for _, r := range []string{resultSuccessful, resultFailed, resultUnknown} {
			if v, ok := runs[typ+"/"+r]; !ok || v != 0 {
				t.Errorf("probeshim_probes_total %s/%s = %v (present %t), want 0", typ, r, v, ok)
			}
		}
	}
	got := errorCounts(t, h.reg)
	if len(got) != 2*len(ErrorReasons()) {
		t.Errorf("%d series, want %d: %v", len(got), 2*len(ErrorReasons()), got)
	}
	for _, typ := range []string{"custom", "liveness"} {
		for _, r := range ErrorReasons() {
			if v, ok := got[typ+"/"+r]; !ok || v != 0 {
				t.Errorf("%s/%s = %v (present %t), want 0", typ, r, v, ok)
			}
		}
	}
	d := desired("p", execSpec())
	d.ProbeType = "other"
	h.m.Sync([]Desired{d})
	h.running("c1")
	h.exec.push(oops)
	h.probe(key("p"))
	if got := errorCounts(t, h.reg); got["other/"+ReasonRuntimeError] != 1 || len(got) != 2*len(ErrorReasons())+1 {
		t.Errorf("after an error of another type: %v", got)
	}
}

// A run that waited for a full pool and then errs or times out says so: the node, not the
// target, may be why. One on time, or one that fails by itself, does not.
func TestLateStartInMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome execOutcome
		slow    bool // the run takes its whole timeout
		want    string
		reason  string
	}{
		{"an error", execOutcome{err: errors.New(`exec: "nc": executable file not found in $PATH`)}, false,
			`exec: "nc": executable file not found in $PATH (started 3s late: the node's exec pool was full)`, ReasonCommandNotFound},
		{"a timeout", execOutcome{err: ErrExecTimeout}, true,
			"command timed out after 1s (started 3s late: the node's exec pool was full)", ""},
		{"a failure of its own", fail, false, "bad", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithConcurrency(1, 0))
			h.running("c1")
			release := make(chan struct{})
			h.exec.setCmdHook(func(_ context.Context, cmd []string) {
				switch {
				case cmd[0] == "hog":
					<-release
				case tc.slow:
					h.clock.Step(time.Second)
				}
			})
			hog := desired("hog", execSpec(threshold(1, 1), execCmd("hog")))
			late := desired("late", execSpec(threshold(1, 1), execCmd("late")))
			h.exec.push(ok, tc.outcome) // the hog's, then the late one's
			h.m.Sync([]Desired{hog})
			h.clock.Step(time.Millisecond)
			h.m.Sync([]Desired{hog, late})
			h.m.dispatchDue()
			eventually(t, "the hog running", func() bool { return h.exec.count() == 1 })
			h.clock.Step(3 * time.Second)
			close(release)
			h.m.inflight.Wait()

			h.expectMessage(key("hog"), Success, "ok")
			u, _ := h.result(key("late"))
			if u.Message != tc.want || u.Reason != tc.reason {
				t.Errorf("late: %v %q, reason %q; want %q, reason %q", u.Result, u.Message, u.Reason, tc.want, tc.reason)
			}
		})
	}
}

// Why a late run waited: its pool full, its namespace's share used, or neither (the node).
func TestWaitReason(t *testing.T) {
	p := &pool{name: "network"}
	for c, want := range map[waitCause]string{
		poolFull:      "the node's network pool was full",
		namespaceFull: "its namespace used its share of the node's network pool",
		notQueued:     "the node was overloaded",
	} {
		if got := p.waitReason(c); got != want {
			t.Errorf("waitReason(%d) = %q, want %q", c, got, want)
		}
	}
}
