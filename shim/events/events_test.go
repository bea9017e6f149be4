// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package events

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/probeshim/probeshim/internal/testkit/poll"
	"github.com/probeshim/probeshim/shim/kube/kubetest"
)

var pod = &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web-0", UID: "uid-1"}

func newRecorder(t *testing.T) (*Recorder, *fake.Clientset, *clocktesting.FakeClock) {
	t.Helper()
	client := fake.NewClientset()
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	kc := kubetest.Adapt(client)
	return New(Config{Client: kc.Events, Component: "probeshim", Host: "node-a", Clock: clock}), client, clock
}

// drain writes everything queued, as Run does.
func drain(r *Recorder) {
	for {
		select {
		case ev := <-r.queue:
			r.write(context.Background(), ev)
		default:
			return
		}
	}
}

func events(t *testing.T, c *fake.Clientset) []corev1.Event {
	t.Helper()
	l, err := c.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// The same event again is one Event whose count grows; another message is another Event.
func TestIdenticalEventsFold(t *testing.T) {
	r, c, clock := newRecorder(t)
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "probe a: Failed")
	drain(r)
	clock.Step(time.Second)
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "probe a: Failed")
	r.Event(pod, corev1.EventTypeNormal, "ProbeSucceeded", "probe a: Succeeded")
	drain(r)
	got := events(t, c)
	if len(got) != 2 {
		t.Fatalf("%d events, want 2: %+v", len(got), got)
	}
	for _, ev := range got {
		want := int32(1)
		if ev.Reason == "ProbeFailed" {
			want = 2
			if !ev.LastTimestamp.After(ev.FirstTimestamp.Time) {
				t.Errorf("folded event's lastTimestamp %v not after its first %v", ev.LastTimestamp, ev.FirstTimestamp)
			}
		}
		if ev.Count != want {
			t.Errorf("%s: count %d, want %d", ev.Reason, ev.Count, want)
		}
		if ev.InvolvedObject != *pod || ev.Source.Component != "probeshim" || ev.Source.Host != "node-a" ||
			ev.ReportingController != "probeshim" || ev.ReportingInstance != "node-a" || ev.Namespace != "ns" {
			t.Errorf("event %+v: wrong object, source or namespace", ev)
		}
	}
}

// An object gets a burst of 25 events, then one per 5 minutes; another object has its own.
func TestRateLimitPerObject(t *testing.T) {
	r, c, clock := newRecorder(t)
	for i := range 30 {
		r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", fmt.Sprintf("message %d", i))
	}
	other := pod.DeepCopy()
	other.Name, other.UID = "web-1", "uid-2"
	r.Event(other, corev1.EventTypeWarning, "ProbeFailed", "message")
	drain(r)
	if n := len(events(t, c)); n != burst+1 {
		t.Fatalf("%d events written, want %d of one object and 1 of the other", n, burst)
	}
	clock.Step(refill)
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "later")
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "later still")
	drain(r)
	if n := len(events(t, c)); n != burst+2 {
		t.Fatalf("%d events after %s, want one more: %d", n, refill, burst+2)
	}
}

// An Event gone from the API server (events expire) is written anew, not lost.
func TestExpiredEventWrittenAnew(t *testing.T) {
	r, c, _ := newRecorder(t)
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "m")
	drain(r)
	first := events(t, c)
	if len(first) != 1 {
		t.Fatalf("%d events, want 1", len(first))
	}
	if err := c.CoreV1().Events("ns").Delete(context.Background(), first[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "m")
	drain(r)
	if got := events(t, c); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("after expiry: %+v, want one new event of count 1", got)
	}
}

// A failed write is not retried forever and does not stop later ones.
func TestFailedWriteDropped(t *testing.T) {
	r, c, _ := newRecorder(t)
	fail := true
	c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, apierrors.NewServiceUnavailable("down")
		}
		return false, nil, nil
	})
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "m")
	drain(r)
	fail = false
	r.Event(pod, corev1.EventTypeWarning, "ProbeFailed", "m")
	drain(r)
	if got := events(t, c); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("%+v, want the second event created", got)
	}
}

// Event never blocks its caller: past the queue's length events are dropped.
func TestEventNeverBlocks(t *testing.T) {
	r, _, _ := newRecorder(t)
	done := make(chan struct{})
	go func() {
		for range queueLen + 10 {
			r.Event(pod, corev1.EventTypeNormal, "ProbeSucceeded", "m")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Event blocked with nothing writing")
	}
	if len(r.queue) != queueLen {
		t.Errorf("%d queued, want %d", len(r.queue), queueLen)
	}
}

// Run writes what Event queued; an object with metadata is referenced by its kind and name.
func TestRunWritesObjectEvents(t *testing.T) {
	r, c, _ := newRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { r.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-2", UID: "uid-3"}}
	r.Event(p, corev1.EventTypeNormal, "Killing", "stopping container app")
	r.Event(&corev1.Pod{}, corev1.EventTypeNormal, "Killing", "no kind: not recorded")
	var got []corev1.Event
	err := poll.Until(context.Background(), 10*time.Second, "the event of web-2", func(context.Context) (bool, string, error) {
		got = events(t, c)
		if len(got) > 1 {
			return false, "", fmt.Errorf("events %+v, want the one of web-2", got)
		}
		return len(got) == 1, fmt.Sprintf("%d events", len(got)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ref := got[0].InvolvedObject; ref.Kind != "Pod" || ref.Name != "web-2" || ref.UID != "uid-3" {
		t.Errorf("involved object %+v", ref)
	}
}
