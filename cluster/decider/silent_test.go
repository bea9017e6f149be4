// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"testing"
	"time"
)

// A failure reported while the node service is silent is not seen: once the node is back, the
// failure is watched for its window from then, so a result that healed meanwhile is refreshed
// before anything restarts.
func TestSilentFailuresAreNotSeen(t *testing.T) {
	d := &decider{seen: map[Workload]map[seenKey]sighting{}}
	wl := Workload{Kind: "Deployment", Namespace: "shop", Name: "web"}
	during, after := t0, t0.Add(time.Minute)

	views := []Pod{silent(failing("web-0", 0))}
	d.markSeen(wl, views, during)
	if s := views[0].Failing[0].Seen; !s.IsZero() {
		t.Fatalf("a silent node's failure seen at %s", s)
	}

	views = []Pod{failing("web-0", 0)}
	d.markSeen(wl, views, after)
	if s := views[0].Failing[0].Seen; !s.Equal(after) {
		t.Fatalf("after the silence the failure is seen at %s, want %s", s, after)
	}
	views = []Pod{failing("web-0", 0)}
	d.markSeen(wl, views, after.Add(time.Second))
	if s := views[0].Failing[0].Seen; !s.Equal(after) {
		t.Fatalf("seen moved to %s", s)
	}
}
