// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

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
