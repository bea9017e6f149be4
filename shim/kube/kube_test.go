// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The narrow clients reach the API server for both groups and the kruise one, and every request's
// outcome is shown to Observe.
func TestClientsReachEachGroup(t *testing.T) {
	var mu sync.Mutex
	var paths, observed []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	c, err := NewForConfig(&rest.Config{Host: srv.URL}, Options{QPS: 100, Burst: 10, Observe: func(r *http.Request, _ *http.Response, _ error) {
		mu.Lock()
		observed = append(observed, r.URL.Path)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.Kube.ConfigMaps("ns").Get(ctx, "p", metav1.GetOptions{})
	_, _ = c.Kube.Leases("ns").Get(ctx, "l", metav1.GetOptions{})
	_ = c.Kruise.Get().Namespace("ns").Resource("containerrecreaterequests").Name("c").Do(ctx).Error()
	want := []string{
		"/api/v1/namespaces/ns/configmaps/p",
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
		"/apis/apps.kruise.io/v1alpha1/namespaces/ns/containerrecreaterequests/c",
	}
	mu.Lock()
	defer mu.Unlock()
	for name, got := range map[string][]string{"served": paths, "observed": observed} {
		if len(got) != len(want) {
			t.Fatalf("%s %v, want %v", name, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s request %d: %s, want %s", name, i, got[i], want[i])
			}
		}
	}
}

// Each kind of traffic has a budget of its own: with every budget spent on probe status writes and
// pod reads, events, restart steps and the Lease still go at once (issue 29: a burst of events or
// status writes delayed a ContainerRecreateRequest's stop by seconds).
func TestBudgetsAreSeparate(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	// One request each, then the next token is 1,000 s away.
	c, err := NewForConfig(&rest.Config{Host: srv.URL}, Options{QPS: 0.001, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A deadline the limiter cannot meet makes it refuse at once instead of waiting.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spent := func(err error) bool { return err != nil && strings.Contains(err.Error(), "rate: Wait") }
	calls := []struct {
		name string
		call func() error
	}{
		{"pod read", func() error { _, err := c.Kube.ConfigMaps("ns").Get(ctx, "p", metav1.GetOptions{}); return err }},
		{"probe status", func() error {
			return c.Kruise.Get().Resource("nodepodprobes").Name("n").Do(ctx).Error()
		}},
		{"event", func() error {
			_, err := c.Kube.Events("ns").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})
			return err
		}},
		{"restart step", func() error {
			return c.Recreate.Get().Namespace("ns").Resource("containerrecreaterequests").Name("c").Do(ctx).Error()
		}},
	}
	for _, k := range calls {
		if err := k.call(); spent(err) {
			t.Fatalf("first %s: %v, want it sent (its budget was untouched)", k.name, err)
		}
		if err := k.call(); !spent(err) {
			t.Errorf("second %s: %v, want the budget spent (burst 1)", k.name, err)
		}
	}
	for i := range 20 {
		if _, err := c.Kube.Leases("ns").Get(ctx, "l", metav1.GetOptions{}); spent(err) {
			t.Fatalf("lease call %d: %v, want no client-side limit", i, err)
		}
	}
}
