// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/probeshim/probeshim/internal/build/metricsref"
)

// Every write to the API server is counted by its resource, the heartbeat's Lease and the restart
// steps as well as the probe results; reads are not; an unknown path keeps the label bounded.
func TestCountWrites(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	req := func(method, path string) *http.Request {
		r, err := http.NewRequest(method, "https://api:6443"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ok, conflict := &http.Response{StatusCode: 200}, &http.Response{StatusCode: 409}
	m.countWrite(req(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/probeshim-node-lease/leases/n1"), ok, nil)
	m.countWrite(req(http.MethodPatch, "/apis/apps.kruise.io/v1alpha1/nodepodprobes/n1/status"), conflict, nil)
	m.countWrite(req(http.MethodPost, "/api/v1/namespaces/games/events"), ok, nil)
	m.countWrite(req(http.MethodPatch, "/api/v1/namespaces/games/pods/gs-0/status"), nil, errors.New("connection refused"))
	m.countWrite(req(http.MethodGet, "/apis/apps.kruise.io/v1alpha1/nodepodprobes"), ok, nil)
	m.countWrite(req(http.MethodPost, "/apis/example.com/v1/widgets"), ok, nil)
	for _, c := range []struct {
		resource, result string
		want             float64
	}{
		{"leases", "success", 1}, {"nodepodprobes/status", "error", 1}, {"nodepodprobes/status", "success", 0},
		{"events", "success", 1}, {"pods/status", "error", 1}, {"other", "success", 1},
		{"containerrecreaterequests/status", "error", 0},
	} {
		if got := testutil.ToFloat64(m.apiWrites.WithLabelValues(c.resource, c.result)); got != c.want {
			t.Errorf("%s %s = %v, want %v", c.resource, c.result, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.apiWrites); n != 2*len(writtenResources)+1 {
		t.Errorf("%d series, want every written resource's two at zero and other's", n)
	}
}

// reference is what DescribeMetrics registers: the node's /metrics and /metrics/probes.
func reference(t *testing.T) (node, probes []metricsref.Family) {
	t.Helper()
	n, p := metricsref.NewRegistry(), metricsref.NewRegistry()
	if err := DescribeMetrics(n, p); err != nil {
		t.Fatal(err)
	}
	var err error
	if node, err = n.Families(); err != nil {
		t.Fatal(err)
	}
	if probes, err = p.Families(); err != nil {
		t.Fatal(err)
	}
	return node, probes
}

// The main /metrics has no series per pod, container or probe: its series do not grow with the
// pods (those are /metrics/probes', the kubelet's per-container ones).
func TestNodeMetricsHaveNoPodLabels(t *testing.T) {
	node, probes := reference(t)
	for _, f := range node {
		for _, l := range f.Labels {
			if slices.Contains([]string{"pod", "pod_uid", "namespace", "container", "probe", "probe_name"}, l) {
				t.Errorf("%s on /metrics has the label %s: a series per pod or probe belongs on /metrics/probes", f.Name, l)
			}
		}
	}
	if len(probes) == 0 {
		t.Error("nothing on /metrics/probes")
	}
}

// Every metric the running service registers is in DescribeMetrics, and so in docs/metrics.md.
func TestMetricsReferenceComplete(t *testing.T) {
	f := newFixture(t, nil)
	f.tracker.set(nil)
	f.run()
	eventually(t, "READY", func() bool { return f.has("READY probing for node node-a") }) // the API side registered
	node, probes := reference(t)
	for _, c := range []struct {
		path string
		reg  *prometheus.Registry
		ref  []metricsref.Family
	}{{"/metrics", f.svc.out.registry, node}, {"/metrics/probes", f.svc.probesRegistry, probes}} {
		names, err := metricsref.Names(c.reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !slices.ContainsFunc(c.ref, func(f metricsref.Family) bool { return f.Name == n }) {
				t.Errorf("%s is registered on %s but not in DescribeMetrics", n, c.path)
			}
		}
	}
}
