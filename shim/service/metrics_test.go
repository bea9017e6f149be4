// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package service

import (
	"errors"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
