// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Rows that shared the lanes are each recorded beside the others and the lanes' time once, so the
// time table's total is the wall time; a row alone is recorded as before; a row that never started
// is left out.
func TestRecordTimes(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	one := &row{name: "k1.37-c2.4", first: t0, last: t0.Add(20 * time.Minute)}
	two := &row{name: "k1.35-c1.7", first: t0.Add(18 * time.Minute), last: t0.Add(27 * time.Minute)}
	for _, c := range []struct {
		rows []*row
		want string
	}{
		{[]*row{one, two, {name: "never"}}, `{"stage":"e2e k1.37-c2.4","beside":"the other rows, in the e2e lanes","seconds":1200}
{"stage":"e2e k1.35-c1.7","beside":"the other rows, in the e2e lanes","seconds":540}
{"stage":"e2e","seconds":1620}
`},
		{[]*row{one}, `{"stage":"e2e k1.37-c2.4","seconds":1200}
`},
	} {
		path := filepath.Join(t.TempDir(), "times.jsonl")
		t.Setenv("PROBESHIM_TEST_TIMES", path)
		recordTimes(c.rows, 27*time.Minute)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("got\n%s\nwant\n%s", got, c.want)
		}
	}
}
