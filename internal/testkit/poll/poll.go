// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package poll is the tests' one way to wait for something: poll with a deadline and say what
// was last seen, never a fixed sleep. Until serves the real-component suites (e2e/framework
// wraps it), Eventually and Consistently the unit and API-server tests.
package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is how often the helpers look.
const Interval = 50 * time.Millisecond

// Condition reports whether what is awaited holds; observed describes what it saw, for the
// timeout message. An error ends the wait at once.
type Condition func(ctx context.Context) (done bool, observed string, err error)

// Until polls cond every Interval until it holds, returns an error, ctx ends, or timeout passes.
// The timeout error names what was awaited and the last thing observed.
func Until(ctx context.Context, timeout time.Duration, what string, cond Condition) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	var observed string
	for {
		done, obs, err := cond(ctx)
		if obs != "" {
			observed = obs
		}
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if observed == "" {
				observed = "(nothing)"
			}
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", time.Since(start).Round(time.Millisecond), what, observed)
		case <-tick.C:
		}
	}
}

// Eventually calls f until it returns nil, failing t with f's last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	err := Until(context.Background(), timeout, "a condition to hold", func(context.Context) (bool, string, error) {
		if err := f(); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Consistently calls f every Interval for d, failing t at its first error.
func Consistently(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	errHeld := errors.New("held")
	var last error
	err := Until(context.Background(), d, "", func(context.Context) (bool, string, error) {
		if last = f(); last != nil {
			return false, "", errHeld
		}
		return false, "", nil
	})
	if errors.Is(err, errHeld) {
		t.Fatal(last)
	}
}
