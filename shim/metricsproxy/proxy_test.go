// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package metricsproxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

// The proxy against a real API server: only a token the API server accepts, of a caller RBAC
// lets get the path, reaches the node service's endpoint; the token is not passed on.
func TestCallersCheckedByTheAPIServer(t *testing.T) {
	dir, err := kubebin.Dir()
	if err != nil {
		t.Skip("no Kubernetes binaries: ", err)
	}
	env := kubebin.Environment(dir)
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc := kubernetes.NewForConfigOrDie(cfg)

	// The node service's loopback endpoint, recording what reaches it.
	var sawAuth []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth = append(sawAuth, r.Header.Get("Authorization"))
		io.WriteString(w, "probeshim_up 1 "+r.URL.Path+"\n") //nolint:errcheck // test server
	}))
	defer upstream.Close()

	reader := token(ctx, t, kc, "scraper", []string{"/metrics", "/metrics/probes"})
	onlyMain := token(ctx, t, kc, "main-only", []string{"/metrics"})
	nobody := token(ctx, t, kc, "nobody", nil)

	url := serve(ctx, t, Options{Upstream: strings.TrimPrefix(upstream.URL, "http://"), Kube: cfg, Hosts: []string{"127.0.0.1"}, Log: logr.Discard()})
	for _, c := range []struct {
		name, token, path string
		want              int
	}{
		{"no token", "", "/metrics", http.StatusUnauthorized},
		// The API server's TokenReview says why it rejects this one, and controller-runtime's filter
		// answers an error it is given with a 500 (as it does for the cluster part's /metrics).
		{"a token the API server never issued", "not-a-token", "/metrics", http.StatusInternalServerError},
		{"a caller without the right", nobody, "/metrics", http.StatusForbidden},
		{"a caller with the right", reader, "/metrics", http.StatusOK},
		{"per-container series", reader, "/metrics/probes", http.StatusOK},
		{"a right to /metrics only", onlyMain, "/metrics/probes", http.StatusForbidden},
		{"a path the node service has but the proxy does not serve", reader, "/healthz", http.StatusNotFound},
	} {
		code, body := get(ctx, t, url+c.path, c.token)
		if code != c.want {
			t.Errorf("%s: GET %s answered %d %q, want %d", c.name, c.path, code, body, c.want)
		}
		if code == http.StatusOK && !strings.Contains(body, "probeshim_up 1 "+c.path) {
			t.Errorf("%s: GET %s body %q, want the node service's", c.name, c.path, body)
		}
	}
	for _, a := range sawAuth {
		if a != "" {
			t.Errorf("the node service received the caller's Authorization header %q", a)
		}
	}
	if len(sawAuth) != 2 {
		t.Errorf("the node service was asked %d times, want 2 (the allowed calls only)", len(sawAuth))
	}

	// The node service down: the scraper learns it from a 502 that says so.
	upstream.Close()
	if code, body := get(ctx, t, url+"/metrics", reader); code != http.StatusBadGateway || !strings.Contains(body, "unreachable") {
		t.Errorf("with the node service down: %d %q, want 502 saying it is unreachable", code, body)
	}
}

// token makes a ServiceAccount allowed to get paths (none: no binding) and returns a token of it.
func token(ctx context.Context, t *testing.T, kc kubernetes.Interface, name string, paths []string) string {
	t.Helper()
	if _, err := kc.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if paths != nil {
		if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: paths, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := kc.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// serve starts the proxy on loopback and returns its base URL.
func serve(ctx context.Context, t *testing.T, o Options) string {
	t.Helper()
	h, err := Handler(o)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Serve(sctx, ln, h, cfg) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "https://" + ln.Addr().String()
}

func get(ctx context.Context, t *testing.T, url, token string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed; the test checks the caller
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
