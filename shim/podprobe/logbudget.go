// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package podprobe

import (
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"
)

// stateLogsPerMinute bounds the info lines of probe state changes: on a node where hundreds of
// probes flap (an overloaded node, a dependency down) one line per change would be hundreds of
// KB a minute in the journal. The NodePodProbe status and the pods' events carry every change;
// the rest of a minute's lines go to debug level, and one line says how many did.
const stateLogsPerMinute = 30

// logBudget hands out the minute's info lines.
type logBudget struct {
	clock clock.Clock
	limit int

	mu          sync.Mutex
	windowStart time.Time
	used        int
	demoted     int // lines of the window logged at debug level instead
}

// log writes line at info level while the minute's budget lasts, else at debug level. The first
// line past the budget, and the first line of the next window after one that ran out, say so.
func (b *logBudget) log(entry logrus.FieldLogger, base logrus.FieldLogger, line string) {
	b.mu.Lock()
	now := b.clock.Now()
	var carried int
	if now.Sub(b.windowStart) >= time.Minute {
		carried = b.demoted
		b.windowStart, b.used, b.demoted = now, 0, 0
	}
	info := b.used < b.limit
	if info {
		b.used++
	} else {
		b.demoted++
	}
	first := b.demoted == 1
	b.mu.Unlock()

	if carried > 0 {
		base.WithField("count", carried).Info("probe state changes logged at debug level only in the last minute")
	}
	if info {
		entry.Info(line)
		return
	}
	if first {
		base.WithField("limit", b.limit).Info("more probe state changes than the limit per minute: " +
			"the rest of this minute's are logged at debug level (the NodePodProbe status and pod events have every one)")
	}
	entry.Debug(line)
}
