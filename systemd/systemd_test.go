// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package systemd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/coreos/go-systemd/v22/journal"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/probeshim/probeshim/internal/testkit/poll"
)

// fakeNotifySocket listens where NOTIFY_SOCKET points, as systemd would,
// and collects the datagrams.
type fakeNotifySocket struct {
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t *testing.T) *fakeNotifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	f := &fakeNotifySocket{}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			f.mu.Lock()
			f.msgs = append(f.msgs, string(buf[:n]))
			f.mu.Unlock()
		}
	}()
	return f
}

// wait returns the messages once there are n, or what there is after 3 s.
func (f *fakeNotifySocket) wait(t *testing.T, n int) []string {
	t.Helper()
	var msgs []string
	_ = poll.Until(context.Background(), 3*time.Second, "notify messages", func(context.Context) (bool, string, error) {
		msgs = f.snapshot()
		return len(msgs) >= n, "", nil
	})
	return msgs
}

func (f *fakeNotifySocket) snapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.msgs...)
}

func (f *fakeNotifySocket) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.msgs
	f.msgs = nil
	return m
}

func TestNotifyMessages(t *testing.T) {
	f := listenNotify(t)
	if err := Status("waiting for containerd\nREADY=1"); err != nil {
		t.Fatal(err)
	}
	if err := Ready("probing 3 pods"); err != nil {
		t.Fatal(err)
	}
	if err := Reloading(); err != nil {
		t.Fatal(err)
	}
	if err := Reloaded(); err != nil {
		t.Fatal(err)
	}
	if err := Stopping(); err != nil {
		t.Fatal(err)
	}
	got := f.wait(t, 5)
	want := []string{
		// A newline in a status must not smuggle in another assignment.
		"STATUS=waiting for containerd READY=1",
		"READY=1\nSTATUS=probing 3 pods",
		"RELOADING=1\nMONOTONIC_USEC=<now>",
		"READY=1",
		"STOPPING=1\nSTATUS=stopping",
	}
	// MONOTONIC_USEC is CLOCK_MONOTONIC in microseconds, when the reload began.
	if len(got) == len(want) {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		usec, err := strconv.ParseInt(strings.TrimPrefix(got[2], "RELOADING=1\nMONOTONIC_USEC="), 10, 64)
		if err == nil && usec > 0 && usec <= ts.Nano()/1000 && ts.Nano()/1000-usec < 10_000_000 {
			got[2] = "RELOADING=1\nMONOTONIC_USEC=<now>"
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("notify messages = %q, want %q", got, want)
	}
}

func TestNotifyWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if err := Ready("x"); err != nil {
		t.Fatalf("Ready without NOTIFY_SOCKET: %v", err)
	}
	t.Setenv("WATCHDOG_USEC", "")
	if WatchdogInterval() != 0 {
		t.Fatal("watchdog without WATCHDOG_USEC")
	}
	done := make(chan struct{})
	go func() {
		Watchdog(context.Background(), func(context.Context) error { return nil }, nil)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Watchdog without a watchdog did not return")
	}
}

func TestWatchdogPingsOnlyWhileHealthy(t *testing.T) {
	f := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "100000") // 100 ms: a ping every 50 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	if got := WatchdogInterval(); got != 50*time.Millisecond {
		t.Fatalf("WatchdogInterval = %s", got)
	}
	var unhealthy atomic.Bool
	var checks atomic.Int32
	health := func(ctx context.Context) error {
		checks.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("health check without a deadline")
		}
		if unhealthy.Load() {
			return errors.New("event stream down")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := logrus.New()
	log.SetOutput(&bytes.Buffer{})
	go func() { Watchdog(ctx, health, log); close(done) }()

	count := func(msgs []string, s string) (n int) {
		for _, m := range msgs {
			if strings.Contains(m, s) {
				n++
			}
		}
		return n
	}
	poll.Eventually(t, 3*time.Second, func() error {
		if msgs := f.snapshot(); count(msgs, "WATCHDOG=1") < 3 {
			return fmt.Errorf("%d pings while healthy: %q", count(msgs, "WATCHDOG=1"), msgs)
		}
		return nil
	})
	f.take()

	// A ping may be in flight when health fails; the status line marks the change, and no ping
	// may follow it.
	unhealthy.Store(true)
	afterUnhealthy := func() ([]string, bool) {
		msgs := f.snapshot()
		for i, m := range msgs {
			if strings.Contains(m, "STATUS=unhealthy: event stream down") {
				return msgs[i+1:], true
			}
		}
		return nil, false
	}
	poll.Eventually(t, 3*time.Second, func() error {
		if _, ok := afterUnhealthy(); !ok {
			return fmt.Errorf("no unhealthy status: %q", f.snapshot())
		}
		return nil
	})
	poll.Consistently(t, 300*time.Millisecond, func() error {
		if msgs, _ := afterUnhealthy(); count(msgs, "WATCHDOG=1") != 0 {
			return fmt.Errorf("%d pings while unhealthy: %q", count(msgs, "WATCHDOG=1"), msgs)
		}
		return nil
	})
	f.take()

	unhealthy.Store(false)
	poll.Eventually(t, 3*time.Second, func() error {
		if msgs := f.snapshot(); count(msgs, "WATCHDOG=1") == 0 || count(msgs, "STATUS=running") == 0 {
			return fmt.Errorf("after recovery: %q", msgs)
		}
		return nil
	})
	if msgs := f.snapshot(); count(msgs, "STATUS=running") != 1 {
		t.Fatalf("after recovery, the status line more than once: %q", msgs)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Watchdog did not stop with its context")
	}
	if checks.Load() < 10 {
		t.Fatalf("only %d health checks", checks.Load())
	}

	// Another process's watchdog is not ours.
	t.Setenv("WATCHDOG_PID", "1")
	if WatchdogInterval() != 0 {
		t.Fatal("watchdog meant for another PID")
	}
}

func TestWatchdogStatusOnFailure(t *testing.T) {
	f := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "40000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	var logs bytes.Buffer
	log := logrus.New()
	log.SetOutput(&logs)
	Watchdog(ctx, func(context.Context) error { return errors.New("containerd unreachable") }, log)
	msgs := f.take()
	var status int
	for _, m := range msgs {
		if strings.Contains(m, "WATCHDOG=1") {
			t.Fatalf("pinged while failing: %q", msgs)
		}
		if m == "STATUS=unhealthy: containerd unreachable" {
			status++
		}
	}
	// The same failure is reported once, not every tick.
	if status != 1 || strings.Count(logs.String(), "unhealthy") != 1 {
		t.Fatalf("status messages %q, log %q", msgs, logs.String())
	}
}

type sent struct {
	msg  string
	prio journal.Priority
	vars map[string]string
}

func TestJournalHookFields(t *testing.T) {
	var got []sent
	h := &JournalHook{identifier: "probeshim", send: func(m string, p journal.Priority, v map[string]string) error {
		got = append(got, sent{m, p, v})
		return nil
	}}
	l := logrus.New()
	l.SetOutput(&bytes.Buffer{})
	l.AddHook(h)
	l.WithFields(logrus.Fields{
		"node": "worker-1", "namespace": "shop", "pod": "web-0", "container": "app", "probe": "idle",
		"pod_uid": "0f1e", "container_id": "abc123", "took": 3 * time.Millisecond,
	}).WithError(errors.New("connection refused")).Warn("probe failed")
	l.Info("plain")

	if len(got) != 2 {
		t.Fatalf("%d entries sent", len(got))
	}
	e := got[0]
	want := map[string]string{
		"NODE": "worker-1", "NAMESPACE": "shop", "POD_NAME": "web-0", "CONTAINER": "app", "PROBE": "idle",
		"POD_UID": "0f1e", "CONTAINER_ID": "abc123", "TOOK": "3ms", "ERROR": "connection refused",
		"SYSLOG_IDENTIFIER": "probeshim",
	}
	for k, v := range want {
		if e.vars[k] != v {
			t.Errorf("%s = %q, want %q", k, e.vars[k], v)
		}
	}
	if e.prio != journal.PriWarning || got[1].prio != journal.PriInfo {
		t.Errorf("priorities %d, %d", e.prio, got[1].prio)
	}
	wantMsg := `probe failed container=app container_id=abc123 error="connection refused" namespace=shop node=worker-1 pod=web-0 pod_uid=0f1e probe=idle took=3ms`
	if e.msg != wantMsg {
		t.Errorf("MESSAGE = %q\nwant      %q", e.msg, wantMsg)
	}
	if got[1].msg != "plain" {
		t.Errorf("MESSAGE = %q", got[1].msg)
	}
	for k := range e.vars {
		if err := validJournalName(k); err != nil {
			t.Errorf("field %q: %v", k, err)
		}
	}
}

// A tenant's text in a field or the message (a probe's output, a pod's name) reaches the journal
// with its control characters escaped: no escape sequence or carriage return reaches the terminal
// of whoever runs journalctl, in MESSAGE or in the structured fields (journalctl -o verbose).
func TestJournalHookEscapesTenantText(t *testing.T) {
	var got []sent
	h := &JournalHook{send: func(m string, p journal.Priority, v map[string]string) error {
		got = append(got, sent{m, p, v})
		return nil
	}}
	l := logrus.New()
	l.SetOutput(&bytes.Buffer{})
	l.AddHook(h)
	evil := "ok\rFAKE LINE\x1b[2J\x1b]0;owned\x07"
	l.WithField("message", "ok\r\x1b[31mred").Warn("probe error: " + evil)
	if len(got) != 1 {
		t.Fatalf("%d entries", len(got))
	}
	for name, v := range map[string]string{"MESSAGE": got[0].msg, "FIELD_MESSAGE": got[0].vars["FIELD_MESSAGE"]} {
		for _, r := range v {
			if unicode.IsControl(r) {
				t.Errorf("%s holds %U: %q", name, r, v)
			}
		}
	}
	if want := `probe error: ok\x0dFAKE LINE\x1b[2J\x1b]0;owned\x07 message=ok\x0d\x1b[31mred`; got[0].msg != want {
		t.Errorf("MESSAGE = %q\nwant      %q", got[0].msg, want)
	}
}

// validJournalName is journald's rule (go-systemd's check is unexported).
func validJournalName(name string) error {
	if name == "" || name[0] == '_' {
		return errors.New("empty or leading underscore")
	}
	for _, c := range name {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return errors.New("invalid character")
		}
	}
	return nil
}

func TestJournalFieldNames(t *testing.T) {
	for in, want := range map[string]string{
		"pod": "POD_NAME", "node": "NODE", "probe_type": "PROBE_TYPE", "http.status": "HTTP_STATUS",
		"_private": "PRIVATE", "9lives": "F_9LIVES", "MESSAGE": "FIELD_MESSAGE", "priority": "FIELD_PRIORITY", "": "F_",
		"naïve": "NA_VE",
	} {
		got := JournalField(in)
		if got != want {
			t.Errorf("JournalField(%q) = %q, want %q", in, got, want)
		}
		if err := validJournalName(got); err != nil {
			t.Errorf("JournalField(%q) = %q: %v", in, got, err)
		}
	}
}

func TestJournalHookFallback(t *testing.T) {
	var stderr bytes.Buffer
	h := &JournalHook{send: func(string, journal.Priority, map[string]string) error { return errors.New("no journald") }, fallback: &stderr}
	l := logrus.New()
	l.SetOutput(&bytes.Buffer{})
	l.AddHook(h)
	l.WithField("pod", "web-0").Error("kept")
	if !strings.Contains(stderr.String(), `msg="kept pod=web-0"`) {
		t.Fatalf("fallback wrote %q", stderr.String())
	}
}

func TestUnderSystemdAndSetup(t *testing.T) {
	t.Setenv("INVOCATION_ID", "")
	t.Setenv("JOURNAL_STREAM", "")
	if UnderSystemd() {
		t.Fatal("UnderSystemd without systemd's variables")
	}
	l := logrus.New()
	if SetupLogging(l, "probeshim") {
		t.Fatal("journald chosen outside systemd")
	}
	if _, ok := l.Formatter.(*logrus.TextFormatter); !ok || l.Out != os.Stderr {
		t.Fatal("outside systemd, logs must be text on stderr")
	}

	t.Setenv("INVOCATION_ID", "0123456789abcdef")
	if !UnderSystemd() {
		t.Fatal("INVOCATION_ID not detected")
	}
	t.Setenv("INVOCATION_ID", "")
	var st = stderrIdentity(t)
	t.Setenv("JOURNAL_STREAM", st)
	if !UnderSystemd() {
		t.Fatal("JOURNAL_STREAM naming stderr not detected")
	}
	t.Setenv("JOURNAL_STREAM", "1:2")
	if UnderSystemd() {
		t.Fatal("JOURNAL_STREAM naming another file detected")
	}
}

func stderrIdentity(t *testing.T) string {
	t.Helper()
	fi, err := os.Stderr.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st, ok := statOf(fi)
	if !ok {
		t.Skip("no stat of stderr")
	}
	return st
}
func statOf(fi os.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), true
}
