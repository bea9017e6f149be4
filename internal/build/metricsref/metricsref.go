// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package metricsref reads what is registered on a Prometheus registry as the metrics reference
// (docs/metrics.md, written by hack/metricsdoc) lists it: each family's name, type, help and label
// names, also of a family that has no series yet.
package metricsref

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Family is one metric family as registered.
type Family struct {
	Name, Type, Help string
	// Labels are the variable labels in their order, then the constant ones by name.
	Labels []string
}

// TypedCollector is a collector that builds its series at scrape time (prometheus.MustNewConstMetric)
// and may have none yet: it says their types, which a prometheus.Desc does not.
type TypedCollector interface {
	prometheus.Collector
	MetricTypes() map[*prometheus.Desc]dto.MetricType
}

// Registry is a prometheus.Registry that keeps the collectors registered on it: a family without
// series (a vector with no children yet) shows its type only through its collector.
type Registry struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{reg: prometheus.NewRegistry()} }

// Register registers c, as a prometheus.Registry does, and keeps it.
func (r *Registry) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers each of cs and panics on the first error, as a prometheus.Registry does.
func (r *Registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c and forgets it.
func (r *Registry) Unregister(c prometheus.Collector) bool {
	if !r.reg.Unregister(c) {
		return false
	}
	// Collectors need not be comparable; their descriptors are, by pointer.
	gone := describe(c)
	r.collectors = slices.DeleteFunc(r.collectors, func(k prometheus.Collector) bool { return slices.Equal(describe(k), gone) })
	return true
}

// Gather gathers the registered collectors' series.
func (r *Registry) Gather() ([]*dto.MetricFamily, error) { return r.reg.Gather() }

// Families describes every registered family, by name. Its type is that of its series where it has
// one, else its collector's: a client_golang vector, or a TypedCollector (which must agree with
// its series when there are some). A family of neither kind without a series, and a collector that
// describes nothing (unchecked: its families cannot be known before it has series), are errors.
func (r *Registry) Families() ([]Family, error) {
	mfs, err := r.reg.Gather()
	if err != nil {
		return nil, err
	}
	seen := map[string]string{}
	for _, mf := range mfs {
		seen[mf.GetName()] = typeName(mf.GetType())
	}
	var out []Family
	for _, c := range r.collectors {
		descs := describe(c)
		if len(descs) == 0 {
			return nil, fmt.Errorf("a collector of type %T describes no metric: its families cannot be listed", c)
		}
		for _, d := range descs {
			f, err := parseDesc(d.String())
			if err != nil {
				return nil, err
			}
			declared := declaredType(c, d)
			f.Type = seen[f.Name]
			switch {
			case f.Type == "" && declared == "":
				return nil, fmt.Errorf("%s has no series to read its type from: its collector (%T) should say it (metricsref.TypedCollector)", f.Name, c)
			case f.Type == "":
				f.Type = declared
			case declared != "" && declared != f.Type:
				return nil, fmt.Errorf("%s: its collector (%T) says %s, its series are a %s", f.Name, c, declared, f.Type)
			}
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Family) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Names are the names of the families c describes (of a *prometheus.Registry: every one registered).
func Names(c prometheus.Collector) ([]string, error) {
	var names []string
	for _, d := range describe(c) {
		f, err := parseDesc(d.String())
		if err != nil {
			return nil, err
		}
		names = append(names, f.Name)
	}
	return names, nil
}

func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var ds []*prometheus.Desc
	for d := range ch {
		ds = append(ds, d)
	}
	return ds
}

// declaredType is the type of d's series that c tells without a series ("" when it does not).
func declaredType(c prometheus.Collector, d *prometheus.Desc) string {
	switch c := c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	case TypedCollector:
		if t, ok := c.MetricTypes()[d]; ok {
			return typeName(t)
		}
	}
	return ""
}

func typeName(t dto.MetricType) string { return strings.ToLower(t.String()) }

// parseDesc reads a descriptor's String(), the only way client_golang shows one:
//
//	Desc{fqName: "…", help: "…", unit: "…", constLabels: {k="v",…}, variableLabels: {a,c(b),…}}
//
// Fields are read by their names, so that one a later client_golang adds is passed over; a change
// of this shape fails the package's test.
func parseDesc(s string) (Family, error) {
	bad := func() (Family, error) { return Family{}, fmt.Errorf("cannot read the descriptor %s", s) }
	rest, ok := strings.CutPrefix(s, "Desc{")
	if !ok {
		return bad()
	}
	var f Family
	var constLabels []string
	for rest != "}" {
		var key string
		if key, rest, ok = strings.Cut(rest, ": "); !ok {
			return bad()
		}
		switch {
		case strings.HasPrefix(rest, `"`):
			v, after, err := unquote(rest)
			if err != nil {
				return bad()
			}
			rest = after
			switch key {
			case "fqName":
				f.Name = v
			case "help":
				f.Help = v
			}
		case strings.HasPrefix(rest, "{"):
			// Label names: a name, c(name) when it is constrained, name="value" when constant.
			var names []string
			rest = rest[1:]
			for !strings.HasPrefix(rest, "}") {
				i := strings.IndexAny(rest, ",=}")
				if i <= 0 {
					return bad()
				}
				names = append(names, strings.TrimSuffix(strings.TrimPrefix(rest[:i], "c("), ")"))
				rest = rest[i:]
				if rest[0] == '=' {
					_, after, err := unquote(rest[1:])
					if err != nil {
						return bad()
					}
					rest = after
				}
				rest = strings.TrimPrefix(rest, ",")
			}
			rest = rest[1:]
			switch key {
			case "constLabels":
				constLabels = names
			case "variableLabels":
				f.Labels = names
			}
		default:
			return bad()
		}
		rest = strings.TrimPrefix(rest, ", ")
	}
	if f.Name == "" {
		return bad()
	}
	f.Labels = append(f.Labels, constLabels...)
	return f, nil
}

// unquote reads the Go-quoted string s starts with and returns it and what follows.
func unquote(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", err
	}
	v, err := strconv.Unquote(q)
	return v, s[len(q):], err
}
