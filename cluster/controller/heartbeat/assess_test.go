// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package heartbeat

import (
	"testing"
	"time"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

func TestAssess(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	grace := 40 * time.Second
	at := func(d time.Duration) *time.Time { t := start.Add(d); return &t }
	for _, tc := range []struct {
		name      string
		renewed   *time.Time
		results   bool
		renews    bool          // recorded Live or Silent before
		silent    time.Duration // recorded silent since start+silent; 0: not recorded
		now       time.Duration // after start
		want      string
		wantSince time.Time
		recheck   time.Duration
	}{
		{name: "renewed within the grace", renewed: at(time.Minute), results: true, now: time.Minute + 10*time.Second,
			want: v1alpha1.NodeServiceLive, wantSince: *at(time.Minute), recheck: 30*time.Second + time.Millisecond},
		{name: "exactly at the grace: still live", renewed: at(time.Minute), now: time.Minute + grace,
			want: v1alpha1.NodeServiceLive, wantSince: *at(time.Minute), recheck: time.Millisecond},
		{name: "older than the grace: silent since the last renewal", renewed: at(time.Minute), results: true,
			now: time.Minute + grace + time.Millisecond, want: v1alpha1.NodeServiceSilent, wantSince: *at(time.Minute)},
		{name: "a Lease without results is silent too", renewed: at(0), now: time.Hour,
			want: v1alpha1.NodeServiceSilent, wantSince: start},
		{name: "no Lease, no results: nothing to make stale", now: time.Hour, want: v1alpha1.NodeServiceNoLease},
		{name: "no Lease ever, results: not expected to renew (kubelet identity, older service)", results: true,
			now: time.Hour, want: v1alpha1.NodeServiceNoLease},
		{name: "Lease gone, results, within the grace of its going missing: still live", results: true, renews: true,
			now: 10 * time.Second, want: v1alpha1.NodeServiceLive, recheck: 30*time.Second + time.Millisecond},
		{name: "Lease gone, results, past the grace: silent since it went missing", results: true, renews: true,
			now: time.Minute, want: v1alpha1.NodeServiceSilent, wantSince: start},
		{name: "Lease gone, no results, past the grace: silent", renews: true, now: time.Minute,
			want: v1alpha1.NodeServiceSilent, wantSince: start},
		{name: "a silent node's Lease deleted: still silent, since as before", results: true, renews: true,
			silent: -time.Hour, now: time.Second, want: v1alpha1.NodeServiceSilent, wantSince: start.Add(-time.Hour)},
		{name: "a silent node renews: live", renewed: at(time.Minute), results: true, renews: true, silent: -time.Hour, now: time.Minute,
			want: v1alpha1.NodeServiceLive, wantSince: *at(time.Minute), recheck: grace + time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var silentSince time.Time
			if tc.silent != 0 {
				silentSince = start.Add(tc.silent)
			}
			st, recheck := assess(tc.renewed, tc.results, tc.renews, start, silentSince, start.Add(tc.now), grace)
			if st.value != tc.want || !st.since.Equal(tc.wantSince) || recheck != tc.recheck {
				t.Errorf("assess = %s since %s, recheck %s; want %s since %s, recheck %s",
					st.value, st.since, recheck, tc.want, tc.wantSince, tc.recheck)
			}
		})
	}
}
