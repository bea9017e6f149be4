// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/probeshim/probeshim/apis/v1alpha1"
	"github.com/probeshim/probeshim/internal/testkit/clocktest"
	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/kube"
)

// The status writer driven one step at a time: a fake clock owns every wait and reports each
// wait the writer starts (so a test knows it is waiting, not writing, and for how long), a fake
// API server records each request.

// patch is one request the fake API server received.
type patch struct{ method, path, contentType, body string }

// fakeAPI answers status patches with the queued codes (200 once the queue is empty).
type fakeAPI struct {
	mu      sync.Mutex
	codes   []int
	patches chan patch
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.patches <- patch{r.Method, r.URL.Path, r.Header.Get("Content-Type"), string(b)}
	a.mu.Lock()
	code := http.StatusOK
	if len(a.codes) > 0 {
		code, a.codes = a.codes[0], a.codes[1:]
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if code == http.StatusOK {
		_, _ = io.WriteString(w, `{"apiVersion":"apps.kruise.io/v1alpha1","kind":"NodePodProbe","metadata":{"name":"node-a"}}`)
		return
	}
	reason := map[int]string{http.StatusConflict: "Conflict", http.StatusNotFound: "NotFound"}[code]
	if reason == "" {
		reason = "InternalError"
	}
	_, _ = fmt.Fprintf(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":%q,"code":%d}`, reason, code)
}

type fakeEngine struct {
	mu       sync.Mutex
	synced   [][]prober.Desired
	snapshot []prober.Update
}

func (e *fakeEngine) Sync(d []prober.Desired) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.synced = append(e.synced, d)
}
func (e *fakeEngine) Updates() <-chan prober.Update { return nil }
func (e *fakeEngine) Snapshot() []prober.Update {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snapshot
}

type writeCounter struct {
	mu   sync.Mutex
	errs []error
}

func (m *writeCounter) StatusWrite(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, err)
}

func (m *writeCounter) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.errs)
}

type writerHarness struct {
	t       *testing.T
	c       *Controller
	api     *fakeAPI
	clock   *clocktest.Clock
	engine  *fakeEngine
	events  *record.FakeRecorder
	metrics *writeCounter
}

var wt0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// newWriter starts only the writer goroutine; the test feeds the informer's objects and the
// engine's results itself (onObject, apply).
func newWriter(t *testing.T, edit ...func(*Config)) *writerHarness {
	t.Helper()
	api := &fakeAPI{patches: make(chan patch, 100)}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cl, err := kube.NewForConfig(&rest.Config{Host: srv.URL}, kube.Options{QPS: 1000, Burst: 1000}) // no client-side throttle: it waits on the real clock
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	if testing.Verbose() {
		log.SetOutput(testLog{t})
	}
	h := &writerHarness{t: t, api: api, clock: clocktest.New(wt0), engine: &fakeEngine{},
		events: record.NewFakeRecorder(100), metrics: &writeCounter{}}
	cfg := Config{Node: "node-a", Client: cl.Kruise, Engine: h.engine, Events: h.events, Metrics: h.metrics,
		Log: log, Clock: h.clock, WriteInterval: time.Second, RefreshInterval: time.Minute}
	for _, e := range edit {
		e(&cfg)
	}
	h.c = New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.c.write(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The refresh ticker is set: the writer is in its loop, and stepping the clock reaches it.
	poll.Eventually(t, 5*time.Second, func() error {
		if !h.clock.HasWaiters() {
			return errors.New("the writer did not start")
		}
		return nil
	})
	return h
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func (h *writerHarness) exists() bool {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return h.c.exists
}

// wait returns how long the writer waits next (on the interval or a backoff).
func (h *writerHarness) wait() time.Duration { h.t.Helper(); return h.clock.Wait(h.t) }

// next returns the next request the API server received.
func (h *writerHarness) next() patch {
	h.t.Helper()
	select {
	case p := <-h.api.patches:
		return p
	case <-time.After(5 * time.Second):
		h.t.Fatal("no status write")
		return patch{}
	}
}

// none checks that nothing was written so far.
func (h *writerHarness) none() {
	h.t.Helper()
	select {
	case p := <-h.api.patches:
		h.t.Fatalf("unexpected status write %s", p.body)
	default:
	}
}

func nodePodProbe(generation int64, status v1alpha1.NodePodProbeStatus, probes ...string) *v1alpha1.NodePodProbe {
	pp := v1alpha1.PodProbe{Name: web.name, Namespace: web.namespace, UID: web.uid, IP: "10.0.0.9"}
	for _, p := range probes {
		pp.Probes = append(pp.Probes, v1alpha1.ContainerProbe{Name: p, ContainerName: "c",
			Probe: v1alpha1.ContainerProbeSpec{Probe: corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}})
	}
	return &v1alpha1.NodePodProbe{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Generation: generation},
		Spec: v1alpha1.NodePodProbeSpec{PodProbes: []v1alpha1.PodProbe{pp}}, Status: status}
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// wantBody is the merge patch of web-0's probe states, each "name,state,probeTime,transitionTime,message".
func wantBody(states ...[5]string) string {
	s := ""
	for i, st := range states {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(`{"name":%q,"state":%q,"lastProbeTime":%q,"lastTransitionTime":%q`, st[0], st[1], st[2], st[3])
		if st[4] != "" {
			s += fmt.Sprintf(`,"message":%q`, st[4])
		}
		s += "}"
	}
	return `{"status":{"podProbeStatuses":[{"name":"web-0","namespace":"ns","uid":"u1","probeStates":[` + s + `]}]}}`
}

// The exact request: a JSON merge patch of the status subresource with the whole sorted status,
// no resourceVersion (the node is the only writer of this status).
func TestWriterPatchBody(t *testing.T) {
	h := newWriter(t)
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "b", "a"))
	h.none()
	h.c.apply(update("b", prober.Failure, "exit 1", wt0.Add(400*time.Millisecond)))
	h.c.apply(update("a", prober.Success, "", wt0.Add(300*time.Millisecond)))
	p := h.next()
	if p.method != http.MethodPatch || p.path != "/apis/apps.kruise.io/v1alpha1/nodepodprobes/node-a/status" ||
		p.contentType != "application/merge-patch+json" {
		t.Errorf("request %s %s (%s), want PATCH of node-a's status as a merge patch", p.method, p.path, p.contentType)
	}
	// The first write goes at once, possibly before the second result: the second is then in
	// the next write, a second later.
	if p.body == wantBody([5]string{"b", "Failed", stamp(wt0), stamp(wt0), "exit 1"}) {
		h.clock.Step(h.wait())
		p = h.next()
	}
	want := wantBody([5]string{"a", "Succeeded", stamp(wt0), stamp(wt0), ""}, [5]string{"b", "Failed", stamp(wt0), stamp(wt0), "exit 1"})
	if p.body != want {
		t.Errorf("body\n%s\nwant\n%s", p.body, want)
	}
}

// Results arriving within WriteInterval of the last write go out together in one write, once
// the interval has passed.
func TestWriterCoalesces(t *testing.T) {
	h := newWriter(t)
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "a", "b"))
	h.c.apply(update("a", prober.Success, "", wt0))
	h.next() // the first write goes at once

	h.c.apply(update("a", prober.Failure, "timeout", wt0))
	h.c.apply(update("b", prober.Success, "", wt0))
	h.c.apply(update("a", prober.Failure, "timeout again", wt0))
	if d := h.wait(); d != time.Second {
		t.Fatalf("the writer waits %v, want the interval (1s)", d)
	}
	h.clock.Step(999 * time.Millisecond)
	h.none()
	h.clock.Step(time.Millisecond)
	p := h.next()
	want := wantBody([5]string{"a", "Failed", stamp(wt0), stamp(wt0), "timeout again"}, [5]string{"b", "Succeeded", stamp(wt0), stamp(wt0), ""})
	if p.body != want {
		t.Errorf("body\n%s\nwant\n%s", p.body, want)
	}
}

// A status written before a restart is the starting point: the engine's first Unknown without
// a message and a result equal to the seeded one change nothing and write nothing; the first
// real change keeps the seeded times of the probes it does not touch.
func TestWriterSeedsFromStatus(t *testing.T) {
	h := newWriter(t)
	before := wt0.Add(-time.Hour)
	seeded := v1alpha1.NodePodProbeStatus{PodProbeStatuses: []v1alpha1.PodProbeStatus{{Name: web.name, Namespace: web.namespace, UID: web.uid,
		ProbeStates: []v1alpha1.ContainerProbeState{
			{Name: "a", State: v1alpha1.ProbeSucceeded, LastProbeTime: metav1.NewTime(before), LastTransitionTime: metav1.NewTime(before)},
			{Name: "b", State: v1alpha1.ProbeFailed, Message: "exit 1", LastProbeTime: metav1.NewTime(before), LastTransitionTime: metav1.NewTime(before)}}}}}
	h.c.onObject(nodePodProbe(3, seeded, "a", "b"))
	h.c.apply(update("a", prober.Unknown, "", wt0))
	h.c.apply(update("b", prober.Unknown, "", wt0))
	h.c.apply(update("a", prober.Success, "", wt0))
	h.c.apply(update("b", prober.Failure, "exit 1", wt0))
	h.c.mu.Lock()
	dirty := h.c.dirty
	h.c.mu.Unlock()
	if dirty {
		t.Error("the seeded status is marked for writing, want nothing changed")
	}
	h.none()
	if n := len(h.events.Events); n != 0 {
		t.Errorf("%d events for states equal to the seeded ones, want none", n)
	}

	h.c.apply(update("b", prober.Success, "", wt0.Add(2*time.Second)))
	p := h.next()
	want := wantBody([5]string{"a", "Succeeded", stamp(before), stamp(before), ""},
		[5]string{"b", "Succeeded", stamp(wt0.Add(2 * time.Second)), stamp(wt0.Add(2 * time.Second)), ""})
	if p.body != want {
		t.Errorf("body\n%s\nwant\n%s", p.body, want)
	}
	if ev := <-h.events.Events; ev != "Normal KruiseProbeSucceeded probe b: Succeeded" {
		t.Errorf("event %q", ev)
	}
}

// A new message without a new state is written (lastProbeTime moves, lastTransitionTime stays)
// and earns no event.
func TestWriterMessageOnlyChange(t *testing.T) {
	h := newWriter(t)
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "a"))
	h.c.apply(update("a", prober.Failure, "exit 1", wt0))
	h.next()
	later := wt0.Add(5 * time.Second)
	h.c.apply(update("a", prober.Failure, "exit 2", later))
	h.clock.Step(h.wait())
	p := h.next()
	if want := wantBody([5]string{"a", "Failed", stamp(later), stamp(wt0), "exit 2"}); p.body != want {
		t.Errorf("body\n%s\nwant\n%s", p.body, want)
	}
	if n := len(h.events.Events); n != 1 {
		t.Errorf("%d events, want 1 (the change to Failed only)", n)
	}
}

// Message-only changes (an exec probe printing the time, every second) are written at most once
// per MessageInterval (10 s by default): the first at once, the next ones held, and the latest of
// them written when the interval ends, with its own probe time. A write for another reason (a new
// state) carries the held message at once; nothing is held back after it.
func TestWriterBoundsMessageOnlyWrites(t *testing.T) {
	h := newWriter(t)
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "a", "b"))
	h.c.apply(update("a", prober.Failure, "tick 0", wt0))
	h.next()
	sec := func(n int) time.Time { return wt0.Add(time.Duration(n) * time.Second) }
	// waitTimer waits until the writer has set its timer for the held messages (the refresh
	// ticker is the other waiter), so stepping the clock reaches it.
	waitTimer := func() {
		t.Helper()
		poll.Eventually(t, 5*time.Second, func() error {
			if n := h.clock.Waiters(); n < 2 {
				return fmt.Errorf("%d waiters on the clock, want the refresh ticker and the messages' timer", n)
			}
			return nil
		})
	}
	writes := 1
	for n := 1; n <= 31; n++ {
		h.clock.Step(time.Second)
		if n == 11 || n == 21 || n == 31 { // the end of an interval: the latest held message
			p := h.next()
			writes++
			if want := wantBody([5]string{"a", "Failed", stamp(sec(n - 1)), stamp(wt0), fmt.Sprintf("tick %d", n-1)}); p.body != want {
				t.Fatalf("at %d s: body\n%s\nwant\n%s", n, p.body, want)
			}
		}
		if n == 31 {
			break
		}
		h.c.apply(update("a", prober.Failure, fmt.Sprintf("tick %d", n), sec(n)))
		switch n {
		case 1: // the first message-only change in a while: at once
			p := h.next()
			writes++
			if want := wantBody([5]string{"a", "Failed", stamp(sec(1)), stamp(wt0), "tick 1"}); p.body != want {
				t.Fatalf("body\n%s\nwant\n%s", p.body, want)
			}
		case 2, 12, 22:
			waitTimer()
		}
		h.none()
	}
	t.Logf("31 results of a 1 s exec probe printing the time: %d status writes (31 without the bound)", writes)
	if writes != 5 {
		t.Errorf("%d writes, want 5", writes)
	}

	// Held (written at 31 s), then another probe's first result: one write with both, at once.
	h.clock.Step(time.Second)
	h.c.apply(update("a", prober.Failure, "tick 32", sec(32)))
	h.c.apply(update("b", prober.Success, "", sec(32)))
	p := h.next()
	want := wantBody([5]string{"a", "Failed", stamp(sec(32)), stamp(wt0), "tick 32"}, [5]string{"b", "Succeeded", stamp(sec(32)), stamp(sec(32)), ""})
	if p.body != want {
		t.Fatalf("body\n%s\nwant\n%s", p.body, want)
	}
	// Nothing is held any more: the interval's end writes nothing.
	h.clock.Step(10 * time.Second)
	poll.Eventually(t, 5*time.Second, func() error {
		if !h.c.messagesDueAt().IsZero() || h.clock.Waiters() != 1 {
			return fmt.Errorf("messages due at %v, %d waiters", h.c.messagesDueAt(), h.clock.Waiters())
		}
		return nil
	})
	h.none()
	if n := len(h.events.Events); n != 1 {
		t.Errorf("%d events, want 1 (a Failed; b's first result Succeeded is none): a message is no event", n)
	}
}

// With MessageInterval negative every message-only change is written (after WriteInterval).
func TestWriterMessageIntervalOff(t *testing.T) {
	h := newWriter(t, func(c *Config) { c.MessageInterval = -1 })
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "a"))
	h.c.apply(update("a", prober.Failure, "tick 0", wt0))
	h.next()
	for n := 1; n <= 3; n++ {
		h.clock.Step(time.Second)
		h.c.apply(update("a", prober.Failure, fmt.Sprintf("tick %d", n), wt0.Add(time.Duration(n)*time.Second)))
		if p := h.next(); !strings.Contains(p.body, fmt.Sprintf(`"tick %d"`, n)) {
			t.Fatalf("write %d: %s", n, p.body)
		}
	}
}

// A rejected write (a conflict, a server error) is retried with backoff (1 s, then 2 s, then
// 4 s, each with up to 10 % jitter), each time with the whole status as it is then; a result
// arriving during the backoff is written at once.
func TestWriterRetries(t *testing.T) {
	h := newWriter(t)
	h.api.codes = []int{http.StatusConflict, http.StatusInternalServerError, http.StatusInternalServerError}
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "a", "b"))
	h.c.apply(update("a", prober.Success, "", wt0))
	first := h.next()
	backoff := func(base time.Duration) time.Duration {
		t.Helper()
		d := h.wait()
		if d < base || d > base+base/10 {
			t.Fatalf("backoff %v, want %v to %v", d, base, base+base/10)
		}
		return d
	}
	d := backoff(time.Second)
	h.clock.Step(d - time.Millisecond)
	h.none()
	h.clock.Step(time.Millisecond)
	if p := h.next(); p.body != first.body {
		t.Errorf("retry body\n%s\nwant the same status\n%s", p.body, first.body)
	}
	backoff(2 * time.Second)
	h.c.apply(update("b", prober.Failure, "exit 1", wt0)) // does not wait for the backoff
	p := h.next()
	want := wantBody([5]string{"a", "Succeeded", stamp(wt0), stamp(wt0), ""}, [5]string{"b", "Failed", stamp(wt0), stamp(wt0), "exit 1"})
	if p.body != want {
		t.Errorf("body\n%s\nwant\n%s", p.body, want)
	}
	h.clock.Step(backoff(4 * time.Second))
	if p := h.next(); p.body != want {
		t.Errorf("body\n%s\nwant\n%s", p.body, want)
	}
	poll.Eventually(t, 5*time.Second, func() error {
		if n := h.metrics.count(); n < 4 {
			return fmt.Errorf("%d writes counted, want 4", n)
		}
		return nil
	})
	var failed int
	h.metrics.mu.Lock()
	for _, err := range h.metrics.errs {
		if err != nil {
			failed++
		}
	}
	h.metrics.mu.Unlock()
	if failed != 3 || h.metrics.count() != 4 {
		t.Errorf("metrics saw %d writes, %d failed; want 4 and 3", h.metrics.count(), failed)
	}
}

// A write to a NodePodProbe that is gone is not retried; the status is written again once the
// object is back.
func TestWriterObjectGone(t *testing.T) {
	h := newWriter(t)
	h.api.codes = []int{http.StatusNotFound}
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "a"))
	h.c.apply(update("a", prober.Success, "", wt0))
	h.next()
	poll.Eventually(t, 5*time.Second, func() error { // the writer has taken the answer in
		if h.exists() {
			return errors.New("a write answered 404 leaves the object taken for existing")
		}
		return nil
	})
	h.c.onDelete()
	h.c.onObject(nodePodProbe(1, v1alpha1.NodePodProbeStatus{}, "a"))
	h.c.apply(update("a", prober.Success, "", wt0.Add(time.Minute)))
	d := h.wait() // the interval since the write that found nothing, not a backoff
	if d > time.Second {
		t.Errorf("the writer waits %v after a write to a deleted object, want at most the interval", d)
	}
	h.clock.Step(d)
	if p := h.next(); p.body != wantBody([5]string{"a", "Succeeded", stamp(wt0.Add(time.Minute)), stamp(wt0.Add(time.Minute)), ""}) {
		t.Errorf("body %s", p.body)
	}
}

// Every RefreshInterval the lastProbeTime of the probes the engine runs is brought forward, so a
// steady probe is seen to be alive; a probe the engine does not run keeps its time.
func TestWriterRefreshesProbeTimes(t *testing.T) {
	h := newWriter(t)
	seeded := v1alpha1.NodePodProbeStatus{PodProbeStatuses: []v1alpha1.PodProbeStatus{{Name: web.name, Namespace: web.namespace, UID: web.uid,
		ProbeStates: []v1alpha1.ContainerProbeState{
			{Name: "a", State: v1alpha1.ProbeSucceeded, LastProbeTime: metav1.NewTime(wt0), LastTransitionTime: metav1.NewTime(wt0)},
			{Name: "b", State: v1alpha1.ProbeSucceeded, LastProbeTime: metav1.NewTime(wt0), LastTransitionTime: metav1.NewTime(wt0)}}}}}
	h.c.onObject(nodePodProbe(1, seeded, "a", "b"))
	h.engine.mu.Lock()
	h.engine.snapshot = []prober.Update{update("a", prober.Success, "", wt0)} // b is not running
	h.engine.mu.Unlock()
	h.clock.Step(59 * time.Second)
	h.none()
	h.clock.Step(time.Second)
	p := h.next()
	want := wantBody([5]string{"a", "Succeeded", stamp(wt0.Add(time.Minute)), stamp(wt0), ""}, [5]string{"b", "Succeeded", stamp(wt0), stamp(wt0), ""})
	if p.body != want {
		t.Errorf("body\n%s\nwant\n%s", p.body, want)
	}
}
