// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package metricsref

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var constDesc = prometheus.NewDesc("built_at_scrape", `A help with "quotes", {braces}, commas and a | bar.`, []string{"pool"}, nil)

// constCollector builds its series at scrape time: none when empty.
type constCollector struct {
	empty    bool
	declared dto.MetricType
}

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- constDesc }

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.empty {
		ch <- prometheus.MustNewConstMetric(constDesc, prometheus.CounterValue, 1, "exec")
	}
}

type typedCollector struct{ constCollector }

func (c typedCollector) MetricTypes() map[*prometheus.Desc]dto.MetricType {
	return map[*prometheus.Desc]dto.MetricType{constDesc: c.declared}
}

// unchecked describes nothing: prometheus takes it, the reference cannot list it.
type unchecked struct{}

func (unchecked) Describe(chan<- *prometheus.Desc) {}
func (unchecked) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(constDesc, prometheus.CounterValue, 1, "exec")
}

// Every family registered, with or without series, by name, with its type, help and labels.
func TestFamilies(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(
		prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total", Help: "Calls."}, []string{"service", "code"}),
		prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "silent", Help: "Silent."}, []string{"node"}),
		prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "took_seconds", Help: "Took."}, []string{"op"}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tokens", Help: "Tokens."}, func() float64 { return 1 }),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "build_info", Help: "Always 1.",
			ConstLabels: prometheus.Labels{"version": `v1,"x"=}`, "goos": "linux"}}),
		typedCollector{constCollector{empty: true, declared: dto.MetricType_COUNTER}},
	)
	got, err := r.Families()
	if err != nil {
		t.Fatal(err)
	}
	want := []Family{
		{Name: "build_info", Type: "gauge", Help: "Always 1.", Labels: []string{"goos", "version"}},
		{Name: "built_at_scrape", Type: "counter", Help: `A help with "quotes", {braces}, commas and a | bar.`, Labels: []string{"pool"}},
		{Name: "calls_total", Type: "counter", Help: "Calls.", Labels: []string{"service", "code"}},
		{Name: "silent", Type: "gauge", Help: "Silent.", Labels: []string{"node"}},
		{Name: "tokens", Type: "gauge", Help: "Tokens."},
		{Name: "took_seconds", Type: "histogram", Help: "Took.", Labels: []string{"op"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("families:\n got %+v\nwant %+v", got, want)
	}
	names, err := Names(r.reg)
	slices.Sort(names)
	if want := []string{"build_info", "built_at_scrape", "calls_total", "silent", "tokens", "took_seconds"}; err != nil || !slices.Equal(names, want) {
		t.Fatalf("Names = %v, %v, want %v", names, err, want)
	}
}

// What the reference cannot tell, or where a collector's word and its series disagree, fails.
func TestFamiliesErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want string
	}{
		{"no series, no type", constCollector{empty: true}, "built_at_scrape has no series to read its type from"},
		{"declared type wrong", typedCollector{constCollector{declared: dto.MetricType_GAUGE}}, "says gauge, its series are a counter"},
		{"unchecked", unchecked{}, "describes no metric"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := NewRegistry()
			r.MustRegister(c.c)
			if _, err := r.Families(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Families() = %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestUnregister(t *testing.T) {
	r := NewRegistry()
	a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total", Help: "A."})
	b := prometheus.NewCounter(prometheus.CounterOpts{Name: "b_total", Help: "B."})
	r.MustRegister(a, b)
	if !r.Unregister(a) || r.Unregister(a) {
		t.Fatal("Unregister: want true once, then false")
	}
	if got, err := r.Families(); err != nil || len(got) != 1 || got[0].Name != "b_total" {
		t.Fatalf("Families() = %+v, %v, want b_total only", got, err)
	}
}

// The descriptor's text, which the reference parses; a client_golang that changes its shape fails here.
func TestParseDesc(t *testing.T) {
	d := prometheus.V2.NewDesc("x_seconds", "Help.", prometheus.ConstrainedLabels{
		{Name: "a"}, {Name: "b", Constraint: strings.ToLower}}, prometheus.Labels{"c": "}{,"})
	got, err := parseDesc(d.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := (Family{Name: "x_seconds", Help: "Help.", Labels: []string{"a", "b", "c"}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("parseDesc(%s) = %+v, want %+v", d, got, want)
	}
	for _, s := range []string{"", "Desc{", `Desc{fqName: "x}`, `Desc{fqName: "x", variableLabels: {a,}`, `Desc{help: "h"}`, "Desc{fqName: x}"} {
		if f, err := parseDesc(s); err == nil {
			t.Errorf("parseDesc(%q) = %+v, want an error", s, f)
		}
	}
}
