// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package criproxy

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// RegisterMetrics registers the proxy's metrics on reg as New does, on collectors of their own: for
// the metrics reference (hack/metricsdoc).
func RegisterMetrics(reg prometheus.Registerer) error {
	_, err := newMetrics(reg)
	return err
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probeshim_cri_proxy_calls_total",
			Help: "CRI calls the kubelet made through the proxy, by service, method and gRPC status code.",
		}, []string{"service", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "probeshim_cri_proxy_call_duration_seconds",
			Help: "Time from a CRI call's arrival at the proxy to the end of the runtime's answer, by service and method.",
			// From a status read (ms) to an image pull or a container stop
			// with a long grace period (minutes).
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"service", "method"}),
	}
	for _, c := range []prometheus.Collector{m.calls, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
