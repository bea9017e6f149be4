// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package checks

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// sleepCall is what a test may not use to wait; spelt in two parts so this file does not match.
const sleepCall = "time." + "Sleep("

// Marker is the word that says a remaining sleep is a measured window, not a wait.
const Marker = "measures"

// TestNoSleepsAsWaits holds issue 29's rule for tests: every wait is a condition with a deadline
// (internal/testkit/poll, e2e/framework's WaitFor and Never). A sleep that remains is one the test
// measures, and its own line or the line above says so with the word "measures". A bare receive
// from time.After is a sleep too.
func TestNoSleepsAsWaits(t *testing.T) {
	for _, f := range repoFiles(t, "*_test.go", 50) {
		lines, ok := readLines(t, "../../"+f)
		if !ok {
			continue // deleted in the work tree
		}
		for _, n := range unmarkedSleeps(lines) {
			t.Errorf("%s:%d: a sleep in a test: wait for the condition with a deadline (internal/testkit/poll, framework.WaitFor), "+
				"or, if the test measures the window, say so with %q on this line or the one above", f, n, Marker)
		}
	}
}

// unmarkedSleeps returns the 1-based numbers of the lines that sleep without the marker on the
// line or the one above.
func unmarkedSleeps(lines []string) []int {
	var out []int
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if !strings.Contains(l, sleepCall) && !strings.HasPrefix(trimmed, "<-time.After(") {
			continue
		}
		if strings.Contains(l, Marker) || (i > 0 && strings.Contains(lines[i-1], Marker)) {
			continue
		}
		out = append(out, i+1)
	}
	return out
}

func readLines(t *testing.T, path string) ([]string, bool) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, false
		}
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return lines, true
}

func TestUnmarkedSleeps(t *testing.T) {
	lines := []string{
		"\t" + sleepCall + "time.Second)",               // 1: a wait
		"\t// measures: no restart within the back-off", // 2
		"\t" + sleepCall + "10 * time.Second)",          // 3: marked above
		"\t" + sleepCall + "d) // measures: CPU over d", // 4: marked on its line
		"\tx := 1",                                   // 5
		"\t<-time.After(time.Second)",                // 6: a sleep by another name
		"\tcase <-time.After(time.Second):",          // 7: a deadline in a select
		"\t// the window the test measures is below", // 8
		"\tx++",                           // 9
		"\t" + sleepCall + "time.Second)", // 10: the marker is two lines up
	}
	if got, want := unmarkedSleeps(lines), []int{1, 6, 10}; !slices.Equal(got, want) {
		t.Errorf("unmarkedSleeps = %v, want %v", got, want)
	}
}
