// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command testreport reads `go test -json` on stdin and prints what `go test` would (each package's
// ok/FAIL line, the output of failed tests; everything with -v), then one closing line "N passed, N failed, N skipped".
// With -no-skip (CI sets it) a skipped test is a failure unless hack/testreport/allowed-skips.txt
// names it with its reason: in CI every suite can run (root, binaries built), so a skip there means a
// suite that did not test what it claims.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed *float64
}

type key struct{ pkg, test string }

type report struct {
	passed, failed, skipped int
	output                  map[key]*strings.Builder
	skips                   []skip
	failedPkgs              []string
	pkgsWithFailedTests     map[string]bool
	// stage names the run in the times file; times are its packages' and tests' elapsed times.
	stage string
	times []timing
}

// failures counts failed tests, plus a failed package that no failed test explains (a build
// failure, a panic in TestMain, a timeout), so the closing line never says 0 failed for a red run.
func (r *report) failures() int {
	n := r.failed
	for _, p := range r.failedPkgs {
		if !r.pkgsWithFailedTests[p] {
			n++
		}
	}
	return n
}

type skip struct {
	key
	reason string
}

func main() {
	noSkip := flag.Bool("no-skip", os.Getenv("CI") == "true", "fail on skipped tests not in -allowed (default: on when CI=true)")
	allowReason := flag.String("allow-reason", "", "under -no-skip, also allow skips whose reason matches this regexp (make unit: the API-server suites left to make integration)")
	verbose := flag.Bool("v", false, "echo every test's output as it comes (for suites whose progress a person follows)")
	allowedFile := flag.String("allowed", "hack/testreport/allowed-skips.txt", "skips allowed under -no-skip: lines `package-pattern test-pattern  # reason`")
	stage := flag.String("stage", "", "record the packages' and top-level tests' times under this stage name in $PROBESHIM_TEST_TIMES (if set)")
	timesOf := flag.String("table", "", "print the time table of this times file (stages, slowest suites and tests) and exit")
	flag.Parse()
	if *timesOf != "" {
		ts, err := readTimes(*timesOf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		table(os.Stdout, ts)
		return
	}
	r, err := read(os.Stdin, os.Stdout, *verbose, *stage)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if path := os.Getenv("PROBESHIM_TEST_TIMES"); path != "" && len(r.times) > 0 {
		if err := appendTimes(path, r.times); err != nil {
			fmt.Fprintln(os.Stderr, "testreport: times:", err)
		}
	}
	var unexpected []skip
	if *noSkip {
		allowed, err := loadAllowed(*allowedFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(2)
		}
		if *allowReason != "" {
			re, err := regexp.Compile(*allowReason)
			if err != nil {
				fmt.Fprintln(os.Stderr, "testreport: -allow-reason:", err)
				os.Exit(2)
			}
			allowed = append(allowed, allowedSkip{reason: re})
		}
		unexpected = r.unexpectedSkips(allowed)
		for _, s := range unexpected {
			fmt.Printf("--- UNEXPECTED SKIP: %s %s: %s\n", s.pkg, s.test, s.reason)
		}
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", r.passed, r.failures()+len(unexpected), r.skipped-len(unexpected))
	if r.failed > 0 || len(r.failedPkgs) > 0 || len(unexpected) > 0 {
		os.Exit(1)
	}
}

// read consumes the event stream, echoing package results and failed tests' output to w.
func read(in io.Reader, w io.Writer, verbose bool, stage string) (*report, error) {
	r := &report{output: map[key]*strings.Builder{}, pkgsWithFailedTests: map[string]bool{}, stage: stage}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintf(w, "%s\n", line) // not an event: build errors and the like, shown as they are
			continue
		}
		k := key{e.Package, e.Test}
		if e.Action == "pass" || e.Action == "fail" {
			r.timing(e)
		}
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" {
				// Package-level lines: "ok  pkg 1.2s", "FAIL", "--- FAIL" summaries, TestMain output.
				if e.Action == "build-output" || !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS\n") {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			if verbose {
				fmt.Fprint(w, e.Output)
			}
			b := r.output[k]
			if b == nil {
				b = &strings.Builder{}
				r.output[k] = b
			}
			b.WriteString(e.Output)
		case "pass":
			if e.Test != "" {
				r.passed++
				delete(r.output, k)
			}
		case "skip":
			if e.Test != "" {
				r.skipped++
				r.skips = append(r.skips, skip{k, skipReason(r.output[k])})
				delete(r.output, k)
			}
		case "fail":
			if e.Test == "" {
				r.failedPkgs = append(r.failedPkgs, e.Package)
				continue
			}
			r.failed++
			r.pkgsWithFailedTests[e.Package] = true
			if b := r.output[k]; b != nil && !verbose {
				fmt.Fprint(w, b.String())
			}
			delete(r.output, k)
		}
	}
	return r, sc.Err()
}

// skipReason is the message of the test's t.Skip: the indented line after "--- SKIP".
func skipReason(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	var reason []string
	for _, l := range strings.Split(b.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		reason = append(reason, l)
	}
	if len(reason) > 3 {
		reason = reason[len(reason)-3:]
	}
	return strings.Join(reason, " | ")
}

// allowedSkip matches a skip by package and test name, or by its reason.
type allowedSkip struct {
	pkg, test, reason *regexp.Regexp
}

func (a allowedSkip) match(s skip) bool {
	if a.reason != nil {
		return a.reason.MatchString(s.reason)
	}
	return a.pkg.MatchString(s.pkg) && a.test.MatchString(s.test)
}

func loadAllowed(path string) ([]allowedSkip, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []allowedSkip
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		spec, reason, _ := strings.Cut(line, "#")
		f := strings.Fields(spec)
		if len(f) != 2 || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want `package-pattern test-pattern  # reason`", path, i+1)
		}
		var a allowedSkip
		for _, x := range []struct {
			re  **regexp.Regexp
			src string
		}{{&a.pkg, f[0]}, {&a.test, f[1]}} {
			if *x.re, err = regexp.Compile("^(" + x.src + ")$"); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func (r *report) unexpectedSkips(allowed []allowedSkip) []skip {
	var out []skip
	for _, s := range r.skips {
		ok := false
		for _, a := range allowed {
			if a.match(s) {
				ok = true
				break
			}
		}
		if !ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pkg+out[i].test < out[j].pkg+out[j].test })
	return out
}
