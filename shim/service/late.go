// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"fmt"
	"strings"
	"time"

	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/server"
)

// lateWindow is how long after a late start the node still says its probes start late: long
// enough to span a few periods of the probes that wait, short enough to clear soon after.
const lateWindow = time.Minute

// probesLate says which pools started a probe late within lateWindow before now, how late and
// why ("" when none did): the node's heartbeat and status carry it, so that a node whose probes
// run behind their time says so while its Lease still says it is live. The text stays the same
// while the node stays as late (no "ago", no counts, whole seconds): each change is a write of
// the Lease's annotation and of the node's NodePodProbe.
func probesLate(now time.Time, pools []prober.PoolStatus) string {
	var parts []string
	for _, p := range pools {
		if p.LastLate.IsZero() || now.Sub(p.LastLate) > lateWindow {
			continue
		}
		why := "the node is overloaded"
		switch {
		case p.Running >= p.Limit:
			why = fmt.Sprintf("all %d runners busy", p.Limit)
		case p.Queued > 0:
			why = fmt.Sprintf("namespaces at their share of %d runners", p.PerNamespace)
		}
		parts = append(parts, fmt.Sprintf("%s probes start late: the latest %s after its time (%s)",
			p.Name, max(p.LastLateBy.Round(time.Second), time.Second), why))
	}
	return strings.Join(parts, "; ")
}

// runnersStatus is the engine's pools for the status socket.
func runnersStatus(now time.Time, pools []prober.PoolStatus) *server.RunnersStatus {
	st := &server.RunnersStatus{Late: probesLate(now, pools)}
	for _, p := range pools {
		st.Pools = append(st.Pools, server.PoolStatus{Name: p.Name, Limit: p.Limit, PerNamespace: p.PerNamespace,
			Running: p.Running, Queued: p.Queued, StartedLate: p.StartedLate, LastLate: p.LastLate,
			LastLateSeconds: p.LastLateBy.Seconds()})
	}
	return st
}
