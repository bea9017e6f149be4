// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package prober

import (
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/probeshim/probeshim/internal/build/metricsref"
)

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// counterValue sums prober_probe_total over series with the given result.
func counterValue(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	var sum float64
	if mf := gather(t, reg)["prober_probe_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			if labels(m)["result"] == result {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func seriesCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	if mf := gather(t, reg)[name]; mf != nil {
		return len(mf.GetMetric())
	}
	return 0
}

// SEMANTICS: metric names and labels as the kubelet's.
func TestMetrics(t *testing.T) {
	h := newHarness(t)
	d := desired("p", execSpec())
	d.ProbeType = "liveness"
	h.m.Sync([]Desired{d})
	h.running("c1")
	if n := seriesCount(t, h.reg, "prober_probe_total"); n != 0 {
		t.Fatalf("%d series before any probe", n)
	}
	h.exec.push(ok, fail)
	h.probe(key("p"))
	h.probe(key("p"))

	mfs := gather(t, h.reg)
	total := mfs["prober_probe_total"]
	if total == nil || total.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("prober_probe_total missing or not a counter: %v", total)
	}
	var got []string
	for _, m := range total.GetMetric() {
		l := labels(m)
		var names []string
		for n := range l {
			names = append(names, n)
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "container,namespace,pod,pod_uid,probe_type,result" {
			t.Fatalf("labels %v", names)
		}
		if l["probe_type"] != "liveness" || l["container"] != ctr || l["pod"] != "pod" || l["namespace"] != "ns" || l["pod_uid"] != podUID {
			t.Fatalf("label values %v", l)
		}
		got = append(got, l["result"])
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "failed,successful" {
		t.Fatalf("results %v", got)
	}
	dur := mfs["prober_probe_duration_seconds"]
	if dur == nil || dur.GetType() != dto.MetricType_HISTOGRAM || len(dur.GetMetric()) != 1 {
		t.Fatalf("prober_probe_duration_seconds: %v", dur)
	}
	l := labels(dur.GetMetric()[0])
	if len(l) != 4 || l["probe_type"] != "liveness" || l["container"] != ctr || l["pod"] != "pod" || l["namespace"] != "ns" {
		t.Fatalf("duration labels %v", l)
	}
	if c := dur.GetMetric()[0].GetHistogram().GetSampleCount(); c != 1 {
		t.Fatalf("duration samples %d, want 1 (failures are not timed)", c)
	}

	h.m.Sync(nil)
	if n := seriesCount(t, h.reg, "prober_probe_total") + seriesCount(t, h.reg, "prober_probe_duration_seconds"); n != 0 {
		t.Fatalf("%d series left after the worker was removed", n)
	}
}

// The types the collectors tell the metrics reference (MetricTypes) are those of their series, every
// one of which exists after a probe (the error counter's from the start, with WithProbeTypes).
func TestMetricTypes(t *testing.T) {
	ref := metricsref.NewRegistry()
	h := newHarness(t, WithRegisterer(ref), WithPodRegisterer(ref), WithProbeTypes("custom"))
	h.m.Sync([]Desired{desired("p", execSpec())})
	h.running("c1")
	h.exec.push(ok)
	h.probe(key("p"))
	fams, err := ref.Families() // fails where a told type and a series disagree
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := ref.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != len(fams) {
		t.Fatalf("%d of %d families have series: the others' told types are not checked", len(mfs), len(fams))
	}
}

// Two probes of one probe_type on a container share a label set: their counts
// are summed into one series, which goes when the last of them goes.
func TestMetricsSharedSeries(t *testing.T) {
	h := newHarness(t)
	a, b := desired("a", execSpec()), desired("b", execSpec())
	h.m.Sync([]Desired{a, b})
	h.running("c1")
	h.exec.push(ok)
	h.probe(key("a"))
	h.probe(key("b"))
	if n, got := seriesCount(t, h.reg, "prober_probe_total"), counterValue(t, h.reg, "successful"); n != 1 || got != 2 {
		t.Fatalf("%d series, successful %v; want 1 series of 2", n, got)
	}
	h.m.Sync([]Desired{b})
	h.probe(key("b"))
	if got := counterValue(t, h.reg, "successful"); got != 2 {
		t.Fatalf("successful %v, want b's 2", got)
	}
	h.m.Sync(nil)
	if n := seriesCount(t, h.reg, "prober_probe_total"); n != 0 {
		t.Fatalf("%d series left", n)
	}
}

func TestDurationBuckets(t *testing.T) {
	var s probeStats
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 7 * time.Millisecond, time.Minute} {
		s.observe(Success, d)
	}
	s.observe(Failure, time.Second) // not timed
	s.observe(Unknown, 10*time.Second)
	want := map[int]uint64{0: 2, 1: 1, numBuckets - 1: 1, numBuckets: 1}
	for i := range s.buckets {
		if got := s.buckets[i].Load(); got != want[i] {
			t.Errorf("bucket %d: %d, want %d", i, got, want[i])
		}
	}
	if sum := math.Float64frombits(s.sumBits.Load()); math.Abs(sum-70.013) > 1e-9 {
		t.Errorf("sum %v", sum)
	}
	if s.results[Success].Load() != 4 || s.results[Failure].Load() != 1 || s.results[Unknown].Load() != 1 {
		t.Errorf("results %v %v %v", s.results[0].Load(), s.results[1].Load(), s.results[2].Load())
	}
}

func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewManager(&fakeContainers{}, WithRegisterer(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewManager(&fakeContainers{}, WithRegisterer(reg)); err == nil {
		t.Fatal("registering the metrics twice on one registry succeeded")
	}
}

// The engine's own registry holds no series per pod: probeshim_probes_total by probe type and
// result only, however many containers are probed; the per-container series (the kubelet's
// names) go to the pod registerer alone.
func TestEngineSeriesDoNotGrowWithPods(t *testing.T) {
	engine, pods := prometheus.NewRegistry(), prometheus.NewRegistry()
	h := newHarness(t)
	m, err := NewManager(h.containers, WithClock(h.clock), WithExecer(h.exec), WithRegisterer(engine), WithPodRegisterer(pods))
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	var ds []Desired
	for i := range 5 {
		d := desired("p", execSpec())
		d.Key.Probe = "p" + string(rune('a'+i))
		ds = append(ds, d)
	}
	m.Sync(ds)
	h.running("c1")
	for _, d := range ds {
		h.exec.push(ok)
		h.probe(d.Key)
	}
	mfs := gather(t, engine)
	if _, ok := mfs["prober_probe_total"]; ok {
		t.Error("the engine's registry has the per-container prober_probe_total")
	}
	total := mfs["probeshim_probes_total"]
	if total == nil || len(total.GetMetric()) != 1 {
		t.Fatalf("probeshim_probes_total: %v, want one series for 5 probes of one type and result", total)
	}
	if l := labels(total.GetMetric()[0]); len(l) != 2 || l["probe_type"] != "custom" || l["result"] != "successful" ||
		total.GetMetric()[0].GetCounter().GetValue() != 5 {
		t.Errorf("probeshim_probes_total %v = %v, want {probe_type=custom, result=successful} 5", l, total.GetMetric()[0].GetCounter().GetValue())
	}
	if n := seriesCount(t, pods, "prober_probe_total"); n != 1 {
		t.Errorf("%d prober_probe_total series on the pod registry, want 1 (one container, one type)", n)
	}
	// A removed probe's runs stay counted: the total never goes back.
	m.Sync(nil)
	if got := gather(t, engine)["probeshim_probes_total"].GetMetric()[0].GetCounter().GetValue(); got != 5 {
		t.Errorf("after the probes went: %v, want 5", got)
	}
}

// errorCounts returns probeshim_probe_errors_total by "probe_type/reason".
func errorCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	return counts(t, reg, "probeshim_probe_errors_total", "reason")
}

// counts is a counter vector's values by "<probe_type>/<label>".
func counts(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	if mf := gather(t, reg)[name]; mf != nil {
		for _, m := range mf.GetMetric() {
			out[labels(m)["probe_type"]+"/"+labels(m)[label]] = m.GetCounter().GetValue()
		}
	}
	return out
}
