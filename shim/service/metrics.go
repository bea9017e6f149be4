// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	buildversion "github.com/probeshim/probeshim/internal/version"
	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/criproxy"
	"github.com/probeshim/probeshim/shim/heartbeat"
	"github.com/probeshim/probeshim/shim/podprobe"
)

// metrics are the node service's own series, beside the engine's.
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
			Help: "Writes (create, update, patch, delete) to the API server by the node service, by resource (with its subresource) and result (success, error).",
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
	// Every series the node service writes, at zero from the start, so that a rate or an alert sees
	// the first error.
	for _, r := range writtenResources {
		m.apiWrites.WithLabelValues(r, "success")
		m.apiWrites.WithLabelValues(r, "error")
	}
	for _, op := range []string{"exec", "read"} {
		m.runtimeCalls.WithLabelValues(op)
		m.runtimeErrors.WithLabelValues(op)
	}
	return m
}

// DescribeMetrics registers on node and probes every metric of probeshim's own that the node service
// serves on /metrics and /metrics/probes, with collectors built as Run builds them but never run:
// for the metrics reference (hack/metricsdoc). Run also serves client_golang's Go runtime and
// process series. A metric registered by the running service and not here fails
// TestMetricsReferenceComplete.
func DescribeMetrics(node, probes prometheus.Registerer) error {
	if err := node.Register(buildversion.BuildInfo("")); err != nil {
		return err
	}
	newMetrics(node)
	if _, err := prober.NewManager(noContainers{}, prober.WithRegisterer(node), prober.WithProbeTypes(podprobe.ProbeTypes()...),
		prober.WithPodRegisterer(probes)); err != nil {
		return err
	}
	heartbeat.New(heartbeat.Config{Registerer: node})
	return criproxy.RegisterMetrics(node) // served while the CRI proxy is on
}

// noContainers is the container source of an engine that never runs.
type noContainers struct{}

func (noContainers) Container(string, string) (prober.ContainerStatus, bool) {
	return prober.ContainerStatus{}, false
}

// writtenResources are what the node service writes: probe results, events, its heartbeat, the
// steps of a restart.
var writtenResources = []string{"nodepodprobes/status", "events", "leases", "pods", "pods/status",
	"containerrecreaterequests", "containerrecreaterequests/status"}

// countWrite counts one write request by its resource, from its URL path
// (/api/v1/namespaces/<ns>/<resource>[/<name>[/<subresource>]], /apis/<group>/<version>/...).
func (m *metrics) countWrite(req *http.Request, resp *http.Response, err error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return
	}
	if err != nil && req.Context().Err() != nil {
		return // cancelled by its caller (stopping): not an outcome
	}
	result := "success"
	if err != nil || resp.StatusCode >= http.StatusBadRequest {
		result = "error"
	}
	m.apiWrites.WithLabelValues(resourceOf(req.URL.Path), result).Inc()
}

// resourceOf is the resource of an API path, with its subresource ("nodepodprobes/status"); "other"
// for a path it does not know, so the label stays bounded.
func resourceOf(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(seg) >= 2 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 3 && seg[0] == "apis":
		seg = seg[3:]
	default:
		return "other"
	}
	if len(seg) >= 2 && seg[0] == "namespaces" {
		seg = seg[2:]
	}
	r := ""
	switch len(seg) {
	case 0:
		return "other"
	case 1, 2:
		r = seg[0]
	default:
		r = seg[0] + "/" + seg[2]
	}
	if !slices.Contains(writtenResources, r) {
		return "other"
	}
	return r
}

// writes keeps the last outcome of the NodePodProbe status writes; it is a podprobe.Metrics.
type writes struct {
	last *lastError
}

// StatusWrite keeps the outcome; the write itself is counted with every other (countWrite).
func (w writes) StatusWrite(err error) {
	if w.last != nil {
		w.last.set(err)
	}
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
