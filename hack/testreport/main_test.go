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
	r, err := read(strings.NewReader(stream), &out, false)
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
