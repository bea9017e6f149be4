// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metrics of the decider, served on the deployment's /metrics.
type metrics struct {
	decisions    *prometheus.CounterVec
	breakersOpen prometheus.Gauge
	configValid  prometheus.Gauge
	reaction     prometheus.Histogram
}

var (
	registerOnce sync.Once
	shared       *metrics
)

// newMetrics registers the decider's metrics with controller-runtime's registry, once per
// process (tests build several deciders).
func newMetrics(tokens func() float64) *metrics {
	registerOnce.Do(func() {
		shared = &metrics{
			decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "probeshim_decider_decisions_total",
				Help: "Liveness restart decisions, by outcome (restart, dry_run, held) and reason; a held restart counts once per reason it is held for.",
			}, []string{"outcome", "reason"}),
			breakersOpen: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "probeshim_decider_circuit_breakers_open",
				Help: "Workloads whose circuit breaker is open: too many of their pods fail liveness at once to restart any.",
			}),
			configValid: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "probeshim_decider_config_valid",
				Help: "1 when the decider's ConfigMap parses (or was absent at start), 0 while it is invalid or was deleted after it was read, and every restart is held.",
			}),
			reaction: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "probeshim_decider_reaction_seconds",
				Help:    "From a liveness state turning Failed (its lastTransitionTime) to the ContainerRecreateRequest's creation, for restarts decided without a hold.",
				Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 300},
			}),
		}
		ctrlmetrics.Registry.MustRegister(shared.decisions, shared.breakersOpen, shared.configValid, shared.reaction,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "probeshim_decider_rate_limit_tokens",
				Help: "Tokens left in the cluster-wide rate limit on new ContainerRecreateRequests.",
			}, func() float64 { return currentTokens() }))
	})
	setTokenSource(tokens)
	shared.configValid.Set(1)
	return shared
}

var (
	tokensMu     sync.Mutex
	tokensSource func() float64
)

func setTokenSource(f func() float64) {
	tokensMu.Lock()
	defer tokensMu.Unlock()
	tokensSource = f
}

func currentTokens() float64 {
	tokensMu.Lock()
	defer tokensMu.Unlock()
	if tokensSource == nil {
		return 0
	}
	return tokensSource()
}
