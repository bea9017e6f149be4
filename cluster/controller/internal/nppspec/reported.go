// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import "sync"

// Reported remembers, per node, the problems already reported as events, so a probe that cannot
// be placed earns one event rather than one per reconcile. A problem that goes away and comes
// back is reported again. The zero value is ready to use.
type Reported struct {
	mu     sync.Mutex
	byNode map[string]map[string]bool
}

// Fresh records keys as the node's current problems and returns the indexes of those not
// reported before.
func (r *Reported) Fresh(node string, keys []string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byNode == nil {
		r.byNode = map[string]map[string]bool{}
	}
	before := r.byNode[node]
	now := make(map[string]bool, len(keys))
	var fresh []int
	for i, k := range keys {
		if !now[k] && !before[k] {
			fresh = append(fresh, i)
		}
		now[k] = true
	}
	if len(now) == 0 {
		delete(r.byNode, node)
	} else {
		r.byNode[node] = now
	}
	return fresh
}

// Forget drops what was recorded for node.
func (r *Reported) Forget(node string) {
	r.mu.Lock()
	delete(r.byNode, node)
	r.mu.Unlock()
}
