// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	clocktesting "k8s.io/utils/clock/testing"
)

// A minute's probe state changes past the budget go to debug level, and the journal says how many.
func TestStateChangeLogsBounded(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.InfoLevel)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	b := &logBudget{clock: clk, limit: 3}
	change := func(n int) {
		for range n {
			b.log(logger.WithField("probe", "idle"), logger, "probe state changed")
		}
	}
	count := func(msg string) (n int) {
		for _, e := range hook.AllEntries() {
			if e.Message == msg {
				n++
			}
		}
		return n
	}

	change(10)
	if got := count("probe state changed"); got != 3 {
		t.Fatalf("%d state lines at info in a minute of 10 changes, want the budget's 3", got)
	}
	if len(hook.AllEntries()) != 4 {
		t.Fatalf("%d lines, want the 3 changes and one notice: %v", len(hook.AllEntries()), hook.AllEntries())
	}

	clk.Step(time.Minute)
	hook.Reset()
	change(1)
	entries := hook.AllEntries()
	if len(entries) != 2 || entries[0].Data["count"] != 7 || entries[1].Message != "probe state changed" {
		t.Fatalf("next minute: %v, want the count of 7 demoted lines, then the change", entries)
	}

	clk.Step(time.Minute)
	hook.Reset()
	change(2)
	if len(hook.AllEntries()) != 2 || count("probe state changed") != 2 {
		t.Fatalf("a quiet minute after: %v, want the 2 changes alone", hook.AllEntries())
	}
}
