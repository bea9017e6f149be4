// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"
)

// timing is one line of the times file (PROBESHIM_TEST_TIMES, JSON lines): a stage's wall time as
// the Makefile measured it (Test and Package empty), or a package's or top-level test's elapsed
// time as go test reported it. Beside names the stages a stage ran beside: its time is not part of
// the total wall time.
type timing struct {
	Stage   string  `json:"stage"`
	Beside  string  `json:"beside,omitempty"`
	Package string  `json:"package,omitempty"`
	Test    string  `json:"test,omitempty"`
	Seconds float64 `json:"seconds"`
}

// timing collects the elapsed time of a package or a top-level test (subtests run inside their
// parent and would count twice).
func (r *report) timing(e event) {
	if r.stage == "" || e.Elapsed == nil || strings.Contains(e.Test, "/") {
		return
	}
	r.times = append(r.times, timing{Stage: r.stage, Package: e.Package, Test: e.Test, Seconds: *e.Elapsed})
}

// appendTimes adds ts to the times file at path.
func appendTimes(path string, ts []timing) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, t := range ts {
		if err := enc.Encode(t); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readTimes(path string) ([]timing, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []timing
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var t timing
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// slowest is how many suites or tests the table lists.
const slowest = 15

// table prints the stages' wall times in the order they ran, the total wall time (the sum of those
// that ran one after another), and the slowest packages ("suite": a test binary, its rig included)
// and top-level tests of all stages.
func table(w io.Writer, ts []timing) {
	var stages, items []timing
	for _, t := range ts {
		if t.Package == "" {
			stages = append(stages, t)
		} else {
			items = append(items, t)
		}
	}
	d := func(s float64) string { return (time.Duration(s*10) * time.Second / 10).String() }
	fmt.Fprintln(w, "== time per stage")
	var total float64
	for _, s := range stages {
		if s.Beside != "" {
			fmt.Fprintf(w, "  %-28s %10s  (beside %s)\n", s.Stage, d(s.Seconds), s.Beside)
			continue
		}
		fmt.Fprintf(w, "  %-28s %10s\n", s.Stage, d(s.Seconds))
		total += s.Seconds
	}
	fmt.Fprintf(w, "  %-28s %10s\n", "total", d(total))
	sort.SliceStable(items, func(i, j int) bool { return items[i].Seconds > items[j].Seconds })
	if len(items) > slowest {
		items = items[:slowest]
	}
	fmt.Fprintf(w, "== the %d slowest suites and tests\n", len(items))
	for _, t := range items {
		what, name := "suite", strings.TrimPrefix(t.Package, "github.com/probeshim/probeshim/")
		if t.Test != "" {
			what, name = "test ", name+" "+t.Test
		}
		fmt.Fprintf(w, "  %10s  %s  %-22s %s\n", d(t.Seconds), what, t.Stage, name)
	}
}
