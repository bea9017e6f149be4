// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const stream = `{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestSkip","Output":"    a_test.go:9: envtest: no kube-apiserver\n"}
{"Action":"output","Package":"p/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"p/a","Test":"TestSkip"}
{"Action":"output","Package":"p/a","Test":"TestHost","Output":"    a_test.go:9: needs PROBESHIM_TEST_HOSTNETWORK\n"}
{"Action":"skip","Package":"p/a","Test":"TestHost"}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"    a_test.go:12: boom\n"}
{"Action":"fail","Package":"p/a","Test":"TestBad"}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t0.1s\n"}
{"Action":"fail","Package":"p/a"}
not json: a build error
{"Action":"fail","Package":"p/b"}
`

func TestRead(t *testing.T) {
	var out strings.Builder
	r, err := read(strings.NewReader(stream), &out, false, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.passed != 1 || r.failed != 1 || r.skipped != 2 || len(r.failedPkgs) != 2 || r.failures() != 2 {
		t.Fatalf("counts: %+v", r)
	}
	for _, want := range []string{"boom", "FAIL\tp/a", "not json: a build error"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "TestOK") {
		t.Errorf("a passing test's output was printed:\n%s", out.String())
	}

	allowedFile := filepath.Join(t.TempDir(), "allowed.txt")
	if err := os.WriteFile(allowedFile, []byte("# header\np/.* TestHost  # needs a host network the rig lacks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	allowed, err := loadAllowed(allowedFile)
	if err != nil {
		t.Fatal(err)
	}
	byReason := r.unexpectedSkips(append(allowed, allowedSkip{reason: regexp.MustCompile("no kube-apiserver")}))
	if len(byReason) != 0 {
		t.Fatalf("a skip allowed by its reason is unexpected: %+v", byReason)
	}
	got := r.unexpectedSkips(allowed)
	if len(got) != 1 || got[0].test != "TestSkip" || !strings.Contains(got[0].reason, "no kube-apiserver") {
		t.Fatalf("unexpected skips: %+v", got)
	}
}

func TestAllowedNeedsReason(t *testing.T) {
	f := filepath.Join(t.TempDir(), "allowed.txt")
	if err := os.WriteFile(f, []byte("p/a TestX\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadAllowed(f); err == nil {
		t.Fatal("an entry without a reason was accepted")
	}
}

// TestShippedList parses the list CI uses.
func TestShippedList(t *testing.T) {
	if _, err := loadAllowed("allowed-skips.txt"); err != nil {
		t.Fatal(err)
	}
}

// Packages and top-level tests are timed under the stage, subtests not; the table sums the stages
// the Makefile recorded and lists the slowest first.
func TestTimes(t *testing.T) {
	const timed = `{"Action":"pass","Package":"p/a","Test":"TestA","Elapsed":3.5}
{"Action":"pass","Package":"p/a","Test":"TestA/sub","Elapsed":3}
{"Action":"fail","Package":"p/a","Test":"TestB","Elapsed":9}
{"Action":"fail","Package":"p/a","Elapsed":12.5}
`
	r, err := read(strings.NewReader(timed), &strings.Builder{}, false, "unit")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.times) != 3 {
		t.Fatalf("times %+v, want TestA, TestB and the package", r.times)
	}
	path := filepath.Join(t.TempDir(), "times.jsonl")
	stages := []timing{{Stage: "unit", Seconds: 20}, {Stage: "e2e k1.37-c2.4", Seconds: 600}, {Stage: "package-test", Beside: "e2e", Seconds: 180}}
	if err := appendTimes(path, stages[:1]); err != nil {
		t.Fatal(err)
	}
	if err := appendTimes(path, append(r.times, stages[1:]...)); err != nil {
		t.Fatal(err)
	}
	ts, err := readTimes(path)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	table(&out, ts)
	got := out.String()
	for _, want := range []string{`unit +20s`, `e2e k1\.37-c2\.4 +10m0s`, `total +10m20s`, `package-test +3m0s  \(beside e2e\)`, `the 3 slowest`, `12\.5s +suite +unit +p/a\n`} {
		if !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if i, j := strings.Index(got, "TestB"), strings.Index(got, "TestA"); i < 0 || j < i {
		t.Errorf("TestB (9 s) not listed before TestA (3.5 s):\n%s", got)
	}
}
