// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package certs

import (
	"strings"
	"testing"
	"time"
)

// The renewal rules without an API server.
func TestProblem(t *testing.T) {
	start := time.Now()
	now := start
	m, err := New(nil, nil, Options{Namespace: "ns", SecretName: "s", ServiceName: "svc", CertDir: t.TempDir(),
		ExtraNames: []string{"127.0.0.1"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	data, err := m.issue(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := m.problem(data); p != "" {
		t.Fatalf("fresh certificate: %s", p)
	}

	now = start.Add(250 * 24 * time.Hour) // past two thirds of a year: renewal is due at ~day 243
	if p := m.problem(data); !strings.HasPrefix(p, "certificate due for renewal") {
		t.Errorf("after 250 days: %q", p)
	}
	now = start

	other, _ := New(nil, nil, Options{Namespace: "ns", SecretName: "s", ServiceName: "renamed", CertDir: t.TempDir(), Now: m.opts.Now})
	if p := other.problem(data); !strings.Contains(p, "names differ") {
		t.Errorf("another Service name: %q", p)
	}

	broken := map[string][]byte{}
	for k, v := range data {
		broken[k] = v
	}
	broken[KeyKey] = broken[KeyCAKey] // a key that does not match the certificate
	if p := m.problem(broken); !strings.Contains(p, "does not match") {
		t.Errorf("mismatched key: %q", p)
	}
	delete(broken, KeyCABundle)
	if p := m.problem(broken); !strings.HasPrefix(p, "CA unusable") {
		t.Errorf("no CA: %q", p)
	}

	// A serving certificate never outlives its CA.
	short, _ := New(nil, nil, Options{Namespace: "ns", SecretName: "s", ServiceName: "svc", CertDir: t.TempDir(),
		CAValidity: 30 * 24 * time.Hour, Now: m.opts.Now})
	d, err := short.issue(nil)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := parsePair(d[KeyCABundle], d[KeyCAKey])
	cert, _ := parsePair(d[KeyCert], d[KeyKey])
	if cert.cert.NotAfter.After(ca.cert.NotAfter) {
		t.Errorf("certificate until %s, CA until %s", cert.cert.NotAfter, ca.cert.NotAfter)
	}
}
