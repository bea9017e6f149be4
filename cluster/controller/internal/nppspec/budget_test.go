// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package nppspec

import (
	"slices"
	"testing"
)

func TestFit(t *testing.T) {
	l := func(ns, name string, bytes int) Load {
		return Load{Namespace: ns, Name: name, Bytes: bytes}
	}
	cases := []struct {
		name      string
		loads     []Load
		available int
		out       []string // keys left out, sorted
	}{
		{name: "everything fits", loads: []Load{l("a", "m", 100), l("b", "m", 100)}, available: 200},
		{name: "nothing asked", available: 100},
		{name: "greedy namespace loses, modest one keeps all",
			loads: []Load{l("modest", "m", 100), l("greedy", "big", 900), l("greedy", "small", 50)}, available: 500,
			out: []string{"greedy/big"}},
		{name: "largest markers of an over-share namespace go first",
			loads: []Load{l("a", "m1", 100), l("a", "m2", 200), l("a", "m3", 300), l("b", "m", 100)}, available: 450,
			out: []string{"a/m3"}},
		{name: "two namespaces over their share both lose",
			loads: []Load{l("a", "m1", 300), l("a", "m2", 300), l("b", "m1", 300), l("b", "m2", 300), l("c", "m", 50)}, available: 700,
			out: []string{"a/m2", "b/m2"}},
		{name: "over-share namespaces get the same share, whatever their names",
			// c keeps its 10; a and b get 245 each: a keeps its 60 (its 200 goes), b's one marker
			// of 250 does not fit; 430 free, a's 200 comes back, b's 250 no longer fits.
			loads: []Load{l("a", "m1", 200), l("a", "m2", 60), l("b", "m", 250), l("c", "m", 10)}, available: 500,
			out: []string{"b/m"}},
		{name: "room the shares leave goes back, smallest left-out marker first",
			// Share 175 each: a keeps 100, b keeps 100; 150 free: a/m2 (100) fits back, b/m2 not.
			loads: []Load{l("a", "m1", 100), l("a", "m2", 100), l("b", "m1", 100), l("b", "m2", 101)}, available: 350,
			out: []string{"b/m2"}},
		{name: "one marker larger than the whole budget",
			loads: []Load{l("a", "huge", 10000), l("b", "m", 100)}, available: 1000,
			out: []string{"a/huge"}},
		{name: "liveness took everything", loads: []Load{l("a", "m", 1)}, available: -5, out: []string{"a/m"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Fit(slices.Clone(tc.loads), tc.available)
			var keys []string
			kept := 0
			for _, o := range out {
				keys = append(keys, o.Key())
			}
			for _, ld := range tc.loads {
				if !slices.Contains(keys, ld.Key()) {
					kept += ld.Bytes
				}
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tc.out) {
				t.Errorf("left out %v, want %v", keys, tc.out)
			}
			if len(out) > 0 && kept > max(tc.available, 0) {
				t.Errorf("kept %d bytes > available %d", kept, tc.available)
			}
			// Same input in another order, same answer.
			rev := slices.Clone(tc.loads)
			slices.Reverse(rev)
			var again []string
			for _, o := range Fit(rev, tc.available) {
				again = append(again, o.Key())
			}
			slices.Sort(again)
			if !slices.Equal(again, keys) {
				t.Errorf("reversed input left out %v, want %v", again, keys)
			}
		})
	}
}
