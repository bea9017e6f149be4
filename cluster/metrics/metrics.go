// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package metrics names the cluster deployment's own metrics, for the metrics reference
// (docs/metrics.md, hack/metricsdoc). The deployment itself registers them where it builds each
// part (cluster/cmd/probeshim-cluster), on controller-runtime's registry.
package metrics

import (
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probeshim/probeshim/cluster/certs"
	"github.com/probeshim/probeshim/cluster/controller/heartbeat"
	"github.com/probeshim/probeshim/cluster/controller/liveness"
	"github.com/probeshim/probeshim/cluster/decider"
	"github.com/probeshim/probeshim/cluster/kruise"
	"github.com/probeshim/probeshim/cluster/leaserelay"
	"github.com/probeshim/probeshim/cluster/webhook"
	buildversion "github.com/probeshim/probeshim/internal/version"
)

// Describe registers on reg every metric of probeshim's own that the deployment serves on /metrics,
// with collectors built as the deployment builds them but never run. controller-runtime adds its
// own series, and the Go runtime's and the process's. A probeshim metric the running deployment
// registers and this does not fails the command's TestRun (integration).
func Describe(reg prometheus.Registerer) error {
	if err := reg.Register(buildversion.BuildInfo("")); err != nil {
		return err
	}
	// No certificate there: the collector tells its type without a series.
	if err := reg.Register(certs.NewExpiryCollector(os.DevNull)); err != nil {
		return err
	}
	if err := (&kruise.Detector{}).NewGauge(reg); err != nil { // with OpenKruise detection on
		return err
	}
	if _, err := webhook.NewPolicyChecker(nil, reg); err != nil {
		return err
	}
	for _, register := range []func(prometheus.Registerer) error{decider.RegisterMetrics, heartbeat.RegisterMetrics, liveness.RegisterMetrics} {
		if err := register(reg); err != nil {
			return err
		}
	}
	leaserelay.New(leaserelay.Options{Registry: reg}) // with the heartbeat relay on
	return nil
}
