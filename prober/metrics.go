// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Result label values, as the kubelet spells them.
const (
	resultSuccessful = "successful"
	resultFailed     = "failed"
	resultUnknown    = "unknown"
)

// The descriptors and bucket bounds below are immutable tables, never written after init; the
// counts live in each Manager (its workers and pools), so two engines share no state.
var (
	probeTotalDesc = prometheus.NewDesc("prober_probe_total",
		"Cumulative number of probes of a container by result.",
		[]string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}, nil)
	probeDurationDesc = prometheus.NewDesc("prober_probe_duration_seconds",
		"Duration in seconds of a probe that did not fail.",
		[]string{"probe_type", "container", "pod", "namespace"}, nil)
	// prometheus.DefBuckets, as the kubelet uses; a fixed array needs the length as a constant.
	durationBuckets = [numBuckets]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

const numBuckets = 11

var (
	probesDesc = prometheus.NewDesc("probeshim_probes_total",
		"Probes run by the engine, by probe_type and result (successful, failed, unknown): the node's total, without a series per pod (those are on /metrics/probes).",
		[]string{"probe_type", "result"}, nil)
	probeErrorsDesc = prometheus.NewDesc("probeshim_probe_errors_total",
		"Probe runs that could not probe, by probe_type and reason (CommandNotFound, PermissionDenied, NetworkNamespaceGone, "+
			"TargetRefused, ExecFreeReadRefused, RuntimeUnavailable, RuntimeError): no result; the probe's state is Unknown with "+
			"the reason while nothing else is known of it (at once for TargetRefused). Errors of a container that stopped "+
			"meanwhile are not counted.",
		[]string{"probe_type", "reason"}, nil)
	startDelayDesc = prometheus.NewDesc("probeshim_probe_start_delay_seconds",
		"How long after its scheduled time a probe started, by pool (exec or network).",
		[]string{"pool"}, nil)
	startedLateDesc = prometheus.NewDesc("probeshim_probes_started_late_total",
		"Probes that started more than 1 s after their scheduled time, by pool: its runners were all busy, or the node was overloaded.",
		[]string{"pool"}, nil)
	queuedDesc = prometheus.NewDesc("probeshim_probes_queued",
		"Due probes waiting for a free runner of their pool.",
		[]string{"pool"}, nil)
	delayBuckets = [numDelayBuckets]float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
)

const numDelayBuckets = 10

// startDelay is a histogram of probe start delays, observed by any runner.
type startDelay struct {
	buckets [numDelayBuckets + 1]atomic.Uint64
	sumBits atomic.Uint64
}

func (s *startDelay) observe(d time.Duration) {
	sec := max(d.Seconds(), 0)
	s.buckets[sort.SearchFloat64s(delayBuckets[:], sec)].Add(1)
	for {
		old := s.sumBits.Load()
		if s.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+sec)) {
			return
		}
	}
}

func (s *startDelay) metric(pool string) prometheus.Metric {
	cum := make(map[float64]uint64, numDelayBuckets)
	var n uint64
	for i, ub := range delayBuckets {
		n += s.buckets[i].Load()
		cum[ub] = n
	}
	n += s.buckets[numDelayBuckets].Load()
	return prometheus.MustNewConstHistogram(startDelayDesc, n, math.Float64frombits(s.sumBits.Load()), cum, pool)
}

// probeStats are one worker's counts. The engine keeps them in the worker and
// builds the series only when scraped: client_golang children cost kilobytes
// per worker, these 128 bytes.
type probeStats struct {
	results [3]atomic.Uint64 // by Result
	// Duration histogram: one counter per bucket plus the overflow; the
	// count is their sum, so a scrape never sees count and buckets disagree.
	buckets [numBuckets + 1]atomic.Uint64
	sumBits atomic.Uint64 // float64 seconds
}

// observe is called by the probing goroutine only.
func (s *probeStats) observe(r Result, took time.Duration) {
	s.results[r].Add(1)
	if r == Failure {
		return // like the kubelet: failures are often timeouts, not timed
	}
	sec := took.Seconds()
	s.buckets[sort.SearchFloat64s(durationBuckets[:], sec)].Add(1)
	for {
		old := s.sumBits.Load()
		if s.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+sec)) {
			return
		}
	}
}

// runKey counts the engine's probes by type and result, for probeshim_probes_total.
type runKey struct {
	probeType string
	result    Result
}

// countRun adds a probe run to probeshim_probes_total; called by the probing goroutines.
func (m *Manager) countRun(probeType string, r Result) {
	k := runKey{probeType, r}
	n, ok := m.runs.Load(k)
	if !ok {
		n, _ = m.runs.LoadOrStore(k, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// errKey counts the runs that could not run by probe type and reason, for probeshim_probe_errors_total.
type errKey struct{ probeType, reason string }

// countError adds a run that could not run to probeshim_probe_errors_total.
func (m *Manager) countError(probeType, reason string) {
	k := errKey{probeType, reason}
	n, ok := m.errs.Load(k)
	if !ok {
		n, _ = m.errs.LoadOrStore(k, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// collector exports the engine's own series: its pools and its probes' total by type and result.
// Their number does not grow with the pods.
type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- probesDesc
	ch <- probeErrorsDesc
	ch <- startDelayDesc
	ch <- startedLateDesc
	ch <- queuedDesc
}

// MetricTypes tells the metrics reference (internal/build/metricsref) the types of the series Collect
// builds: probeshim_probes_total and probeshim_probe_errors_total have none without WithProbeTypes
// before a probe ran.
func (c collector) MetricTypes() map[*prometheus.Desc]dto.MetricType {
	return map[*prometheus.Desc]dto.MetricType{probesDesc: dto.MetricType_COUNTER, probeErrorsDesc: dto.MetricType_COUNTER,
		startDelayDesc: dto.MetricType_HISTOGRAM, startedLateDesc: dto.MetricType_COUNTER, queuedDesc: dto.MetricType_GAUGE}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	pools := []*pool{&c.m.execPool, &c.m.netPool}
	queued := []int{c.m.execPool.queue.n, c.m.netPool.queue.n}
	c.m.mu.Unlock()
	for i, p := range pools {
		ch <- p.delay.metric(p.name)
		ch <- prometheus.MustNewConstMetric(startedLateDesc, prometheus.CounterValue, float64(p.late.Load()), p.name)
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(queued[i]), p.name)
	}
	c.m.runs.Range(func(k, n any) bool {
		key := k.(runKey)
		ch <- prometheus.MustNewConstMetric(probesDesc, prometheus.CounterValue, float64(n.(*atomic.Uint64).Load()),
			key.probeType, resultLabel(key.result))
		return true
	})
	c.m.errs.Range(func(k, n any) bool {
		key := k.(errKey)
		ch <- prometheus.MustNewConstMetric(probeErrorsDesc, prometheus.CounterValue, float64(n.(*atomic.Uint64).Load()),
			key.probeType, key.reason)
		return true
	})
}

// podCollector exports the workers' stats with the kubelet's metric names and labels, a series per
// container and probe type, as the kubelet serves them on /metrics/probes. A removed worker's
// series disappear with it. Probes that share a label set (two probes of one probe_type on a
// container) are summed into one series.
type podCollector struct{ m *Manager }

func (c podCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- probeTotalDesc
	ch <- probeDurationDesc
}

// MetricTypes tells the metrics reference the types of the series Collect builds: there are none
// without probes.
func (c podCollector) MetricTypes() map[*prometheus.Desc]dto.MetricType {
	return map[*prometheus.Desc]dto.MetricType{probeTotalDesc: dto.MetricType_COUNTER, probeDurationDesc: dto.MetricType_HISTOGRAM}
}

type totalKey struct {
	probeType, container, pod, ns, uid string
	result                             Result
}

type durKey struct{ probeType, container, pod, ns string }

type durAgg struct {
	buckets [numBuckets + 1]uint64
	sum     float64
}

func (c podCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	ws := make([]*worker, 0, len(c.m.workers))
	for _, w := range c.m.workers {
		ws = append(ws, w)
	}
	c.m.mu.Unlock()

	totals := map[totalKey]uint64{}
	durs := map[durKey]*durAgg{}
	for _, w := range ws {
		s := &w.stats
		for r := range s.results {
			if n := s.results[r].Load(); n > 0 {
				totals[totalKey{w.probeType, w.key.Container, w.pod.name, w.pod.namespace, w.pod.uid, Result(r)}] += n
			}
		}
		var seen bool
		var b [numBuckets + 1]uint64
		for i := range b {
			b[i] = s.buckets[i].Load()
			seen = seen || b[i] > 0
		}
		if !seen {
			continue
		}
		k := durKey{w.probeType, w.key.Container, w.pod.name, w.pod.namespace}
		a := durs[k]
		if a == nil {
			a = &durAgg{}
			durs[k] = a
		}
		for i := range b {
			a.buckets[i] += b[i]
		}
		a.sum += math.Float64frombits(s.sumBits.Load())
	}

	for k, n := range totals {
		ch <- prometheus.MustNewConstMetric(probeTotalDesc, prometheus.CounterValue, float64(n),
			k.probeType, resultLabel(k.result), k.container, k.pod, k.ns, k.uid)
	}
	for k, a := range durs {
		cum := make(map[float64]uint64, numBuckets)
		var n uint64
		for i, ub := range durationBuckets {
			n += a.buckets[i]
			cum[ub] = n
		}
		n += a.buckets[numBuckets]
		ch <- prometheus.MustNewConstHistogram(probeDurationDesc, n, a.sum, cum,
			k.probeType, k.container, k.pod, k.ns)
	}
}

func resultLabel(r Result) string {
	switch r {
	case Success:
		return resultSuccessful
	case Failure:
		return resultFailed
	}
	return resultUnknown
}
