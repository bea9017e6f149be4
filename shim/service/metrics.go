// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/probeshim/probeshim/prober"
)

// metrics are the node service's own series, beside the engine's
// prober_probe_* ones.
type metrics struct {
	apiWrites     *prometheus.CounterVec
	runtimeCalls  *prometheus.CounterVec
	runtimeErrors *prometheus.CounterVec
}

// lastError keeps the outcome of the last attempt of something.
type lastError struct {
	mu   sync.Mutex
	last error
}

func (l *lastError) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = err
}

func (l *lastError) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		apiWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probeshim_api_writes_total",
			Help: "Writes to the API server by the node service, by resource and result.",
		}, []string{"resource", "result"}),
		runtimeCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probeshim_runtime_calls_total",
			Help: "Probe processes started in containers (exec) and files read in them without one (read, exec-free probes).",
		}, []string{"operation"}),
		runtimeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probeshim_runtime_errors_total",
			Help: "Calls to the container runtime that failed for a reason other than the probe itself, by operation.",
		}, []string{"operation"}),
	}
	reg.MustRegister(m.apiWrites, m.runtimeCalls, m.runtimeErrors)
	return m
}

// writes counts the writes of one resource and keeps the last outcome; it
// is a podprobe.Metrics.
type writes struct {
	m        *metrics
	resource string
	last     *lastError
}

func (w writes) StatusWrite(err error) {
	if w.last != nil {
		w.last.set(err)
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	w.m.apiWrites.WithLabelValues(w.resource, result).Inc()
}

// countingExecer counts exec calls, and those that failed in the runtime; a
// timeout is the probe's own outcome and not counted as failed.
type countingExecer struct {
	prober.Execer
	m     *metrics
	calls prometheus.Counter
}

func newCountingExecer(e prober.Execer, m *metrics) countingExecer {
	return countingExecer{Execer: e, m: m, calls: m.runtimeCalls.WithLabelValues("exec")}
}

func (e countingExecer) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (prober.ExecResult, error) {
	e.calls.Inc()
	res, err := e.Execer.Exec(ctx, id, cmd, timeout)
	if err != nil && !errors.Is(err, prober.ErrExecTimeout) && ctx.Err() == nil {
		e.m.runtimeErrors.WithLabelValues("exec").Inc()
	}
	return res, err
}

// countingReader counts exec-free reads, and those that failed in the runtime
// (under the "read" label); an unreadable file or a timeout is the probe's own
// outcome.
type countingReader struct {
	prober.FileReader
	m     *metrics
	calls prometheus.Counter
}

func newCountingReader(r prober.FileReader, m *metrics) countingReader {
	return countingReader{FileReader: r, m: m, calls: m.runtimeCalls.WithLabelValues("read")}
}

func (r countingReader) ReadFile(ctx context.Context, id, path string, limit int, timeout time.Duration) ([]byte, error) {
	r.calls.Inc()
	b, err := r.FileReader.ReadFile(ctx, id, path, limit, timeout)
	if err != nil && !errors.Is(err, prober.ErrExecTimeout) && !errors.Is(err, prober.ErrFileUnreadable) &&
		!errors.Is(err, prober.ErrReadUnsupported) && ctx.Err() == nil {
		r.m.runtimeErrors.WithLabelValues("read").Inc()
	}
	return b, err
}
