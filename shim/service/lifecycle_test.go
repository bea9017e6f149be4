// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
)

// journal records what the fake components did, in order.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, s)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.lines)
}

type fakeComponent struct {
	name     string
	j        *journal
	startErr error
}

func (f *fakeComponent) Name() string { return f.name }

func (f *fakeComponent) Start(context.Context) error {
	if f.startErr != nil {
		f.j.add("fail " + f.name)
		return f.startErr
	}
	f.j.add("start " + f.name)
	return nil
}

func (f *fakeComponent) Stop(context.Context) error {
	f.j.add("stop " + f.name)
	return nil
}

func quietLog() *logrus.Entry {
	l, _ := logtest.NewNullLogger()
	return logrus.NewEntry(l)
}

func TestLifecycleOrder(t *testing.T) {
	j := &journal{}
	lc := &lifecycle{log: quietLog()}
	if err := lc.start(context.Background(), &fakeComponent{name: "a", j: j}, &fakeComponent{name: "b", j: j}); err != nil {
		t.Fatal(err)
	}
	// A second batch, as after start-up's waits.
	if err := lc.start(context.Background(), &fakeComponent{name: "c", j: j}); err != nil {
		t.Fatal(err)
	}
	lc.stop()
	want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	lc.stop() // stops nothing twice
	if got := j.get(); len(got) != len(want) {
		t.Fatalf("second stop: %v", got)
	}
}

// A component that fails to start: the error names it, nothing after it
// starts, and what started before it is stopped in reverse order.
func TestLifecycleStartFailure(t *testing.T) {
	j := &journal{}
	lc := &lifecycle{log: quietLog()}
	err := lc.start(context.Background(),
		&fakeComponent{name: "a", j: j}, &fakeComponent{name: "b", j: j},
		&fakeComponent{name: "c", j: j, startErr: errors.New("port taken")},
		&fakeComponent{name: "d", j: j})
	if err == nil || !strings.HasPrefix(err.Error(), "c: ") || !strings.Contains(err.Error(), "port taken") {
		t.Fatalf("err = %v", err)
	}
	lc.stop()
	want := []string{"start a", "start b", "fail c", "stop b", "stop a"}
	if got := j.get(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A loop runs until its own Stop, not until the caller's context ends, so
// that stopping follows the lifecycle's order; Stop waits for it.
func TestLoop(t *testing.T) {
	stopped, windDown, ended := make(chan struct{}), make(chan struct{}), make(chan struct{})
	l := newLoop("x", quietLog(), func(ctx context.Context) error {
		<-ctx.Done()
		close(stopped)
		<-windDown // the test says when winding down is over
		close(ended)
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-stopped:
		t.Fatal("the loop ended with its caller's context")
	case <-time.After(50 * time.Millisecond):
	}
	// While the loop winds down, Stop waits for it, here until its own context ends.
	sctx, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	if err := l.Stop(sctx); err == nil {
		t.Fatal("Stop returned before the loop ended")
	}
	<-stopped
	close(windDown)
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Stop returned before the loop ended")
	}

	stuck := newLoop("stuck", quietLog(), func(context.Context) error { select {} })
	if err := stuck.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sctx, scancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer scancel()
	if err := stuck.Stop(sctx); err == nil {
		t.Fatal("Stop of a loop that does not end must report it")
	}
}
