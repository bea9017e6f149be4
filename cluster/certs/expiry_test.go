// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package certs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/probeshim/probeshim/internal/build/metricsref"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
)

// The collector reports the served certificate's NotAfter, and nothing while there is none.
func TestExpiryCollector(t *testing.T) {
	dir := t.TempDir()
	c := NewExpiryCollector(dir)
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d series without a certificate", n)
	}
	notAfter := time.Now().Add(90 * time.Minute).Truncate(time.Second)
	cert := testpki.NewCA(t).Issue(t, testpki.Leaf{CN: "webhook", DNS: []string{"probeshim-webhook.probeshim-system.svc"}, NotAfter: notAfter})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("probeshim_webhook_certificate_expiry_timestamp_seconds %g", float64(notAfter.Unix()))
	if err := testutil.CollectAndCompare(c, strings.NewReader("# HELP probeshim_webhook_certificate_expiry_timestamp_seconds When the webhook serving certificate in the certificate directory stops being valid (its NotAfter), as a Unix time.\n# TYPE probeshim_webhook_certificate_expiry_timestamp_seconds gauge\n"+want+"\n")); err != nil {
		t.Error(err)
	}
	ref := metricsref.NewRegistry()
	ref.MustRegister(c)
	if _, err := ref.Families(); err != nil { // the type MetricTypes tells is the series'
		t.Error(err)
	}
}
