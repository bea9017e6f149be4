// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	err := Until(context.Background(), 5*time.Second, "three looks", func(context.Context) (bool, string, error) {
		n++
		return n == 3, "", nil
	})
	if err != nil || n != 3 {
		t.Errorf("Until = %v after %d looks, want nil after 3", err, n)
	}
	err = Until(context.Background(), 120*time.Millisecond, "never", func(context.Context) (bool, string, error) {
		return false, "still no", nil
	})
	if err == nil || !strings.Contains(err.Error(), "waiting for never; last seen: still no") {
		t.Errorf("timeout error %v", err)
	}
	boom := errors.New("boom")
	if err := Until(context.Background(), 5*time.Second, "x", func(context.Context) (bool, string, error) { return false, "", boom }); !errors.Is(err, boom) {
		t.Errorf("a condition's error: %v, want it at once", err)
	}
}

// A failing t, to see Eventually and Consistently fail.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...); panic(r) }

// run runs f until r fails it.
func run(r *recorder, f func(*recorder)) {
	defer func() { _ = recover() }()
	f(r)
}

func TestEventuallyAndConsistently(t *testing.T) {
	n := 0
	Eventually(t, 5*time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	r := &recorder{}
	run(r, func(r *recorder) { Eventually(r, 100*time.Millisecond, func() error { return errors.New("not yet") }) })
	if !strings.Contains(r.failed, "last seen: not yet") {
		t.Errorf("Eventually failed with %q, want the last error", r.failed)
	}
	Consistently(t, 120*time.Millisecond, func() error { return nil })
	r = &recorder{}
	n = 0
	run(r, func(r *recorder) {
		Consistently(r, 5*time.Second, func() error {
			if n++; n == 2 {
				return errors.New("broke")
			}
			return nil
		})
	})
	if r.failed != "broke" {
		t.Errorf("Consistently failed with %q, want its first error", r.failed)
	}
}
