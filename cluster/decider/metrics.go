// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one decider, served on the deployment's /metrics when its Options name a registry.
type metrics struct {
	decisions    *prometheus.CounterVec
	breakersOpen prometheus.Gauge
	configValid  prometheus.Gauge
	reaction     prometheus.Histogram
	tokens       prometheus.GaugeFunc
	held         *prometheus.GaugeVec
}

// newMetrics builds the decider's metrics; tokens reports what is left of the rate limit.
func newMetrics(tokens func() float64) *metrics {
	m := &metrics{
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
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "probeshim_decider_held_pods",
			Help: "Pods whose latest liveness restart decision is a hold, by reason: a failing container that is not being restarted.",
		}, []string{"reason"}),
		tokens: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "probeshim_decider_rate_limit_tokens",
			Help: "Tokens left in the cluster-wide rate limit on new ContainerRecreateRequests.",
		}, tokens),
	}
	m.configValid.Set(1)
	// Every series at zero from the start, so that a rate or an alert sees the first one.
	for _, r := range heldReasons {
		m.decisions.WithLabelValues(string(Held), string(r))
		m.held.WithLabelValues(string(r))
	}
	m.decisions.WithLabelValues(string(Restart), string(ReasonLivenessFailed))
	m.decisions.WithLabelValues(string(DryRun), string(ReasonLivenessFailed))
	return m
}

// RegisterMetrics registers the decider's metrics on reg as SetupWithManager does, on collectors of
// their own: for the metrics reference (hack/metricsdoc).
func RegisterMetrics(reg prometheus.Registerer) error {
	return newMetrics(func() float64 { return 0 }).register(reg)
}

// register adds the metrics to reg; nil registers nothing (the counts are kept all the same).
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.decisions, m.breakersOpen, m.configValid, m.reaction, m.tokens, m.held} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
