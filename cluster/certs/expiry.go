// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package certs

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// expiryDesc is the serving certificate's end of validity, read from the files the webhook server
// serves (whoever wrote them: this deployment or cert-manager), so an alert sees a rotation that
// did not happen.
var expiryDesc = prometheus.NewDesc("probeshim_webhook_certificate_expiry_timestamp_seconds",
	"When the webhook serving certificate in the certificate directory stops being valid (its NotAfter), as a Unix time.", nil, nil)

// ExpiryCollector reports the NotAfter of certDir's tls.crt at each scrape; nothing while the file
// is missing or unreadable (the deployment's readiness tells that).
type ExpiryCollector struct{ certDir string }

// NewExpiryCollector is an ExpiryCollector for the webhook server's certificate directory.
func NewExpiryCollector(certDir string) *ExpiryCollector { return &ExpiryCollector{certDir: certDir} }

func (c *ExpiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

// MetricTypes tells the metrics reference (internal/build/metricsref) the type of the series Collect
// builds: there is none without a certificate.
func (c *ExpiryCollector) MetricTypes() map[*prometheus.Desc]dto.MetricType {
	return map[*prometheus.Desc]dto.MetricType{expiryDesc: dto.MetricType_GAUGE}
}

func (c *ExpiryCollector) Collect(ch chan<- prometheus.Metric) {
	b, err := os.ReadFile(filepath.Join(c.certDir, "tls.crt"))
	if err != nil {
		return
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
}
