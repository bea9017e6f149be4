// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package clocktest is a fake clock that tells a test each wait the code under test starts, so
// the test steps time only once the code waits, and knows for how long it waits.
package clocktest

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// Clock is k8s.io/utils/clock/testing's FakeClock whose After reports each wait on Waits, once
// its timer is set (stepping the clock then reaches it).
type Clock struct {
	*testingclock.FakeClock
	waits chan time.Duration
}

// New returns a Clock at t.
func New(t time.Time) *Clock {
	return &Clock{FakeClock: testingclock.NewFakeClock(t), waits: make(chan time.Duration, 100)}
}

// After is the fake clock's, reported.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.waits <- d
	return ch
}

// Wait returns the duration of the next After, failing t when none starts within 5 s.
func (c *Clock) Wait(t testing.TB) time.Duration {
	t.Helper()
	select {
	case d := <-c.waits:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("nothing waits on the clock")
		return 0
	}
}

// NoWait fails t if a wait was started and not yet taken by Wait.
func (c *Clock) NoWait(t testing.TB) {
	t.Helper()
	select {
	case d := <-c.waits:
		t.Fatalf("unexpected wait of %v", d)
	default:
	}
}
