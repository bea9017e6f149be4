// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package metricsproxy serves the node service's metrics to the cluster: HTTPS on the node's
// address, answering only callers the API server authenticates (TokenReview of their bearer
// token) and authorizes for `get` on the path (SubjectAccessReview of the non-resource URL), as
// the kubelet's own /metrics. The node service itself keeps serving them on loopback only; this
// proxy forwards the allowed paths there.
//
// It is a process of its own (probeshim-metrics) because the maintained code for the check —
// controller-runtime's filter over k8s.io/apiserver's delegating authenticator and authorizer —
// links client-go's typed clients and scheme: 34 MB more binary and 21 MB more RSS at start,
// measured, which the node service does not pay for a feature not every cluster uses.
package metricsproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
)

// Paths are the node service's endpoints the proxy serves; every other path is 404 without
// asking the API server anything.
var Paths = []string{"/metrics", "/metrics/probes"}

// Options say what to serve and how callers are checked.
type Options struct {
	// Upstream is the node service's metrics address (host:port, usually on loopback).
	Upstream string
	// Kube is the node's API server credentials, which create the TokenReviews and
	// SubjectAccessReviews.
	Kube *rest.Config
	// CertFile and KeyFile are the serving certificate, reloaded when they change; both empty
	// means a self-signed one made at start for Hosts (scrapers then check the caller, not the
	// server, as they do with the kubelet's default certificate).
	CertFile, KeyFile string
	Hosts             []string
	Log               logr.Logger
}

// Handler forwards Paths to the upstream for callers allowed to get them.
func Handler(o Options) (http.Handler, error) {
	if o.Upstream == "" {
		return nil, errors.New("metricsproxy: no upstream address")
	}
	hc, err := rest.HTTPClientFor(o.Kube)
	if err != nil {
		return nil, fmt.Errorf("metricsproxy: API server client: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(o.Kube, hc)
	if err != nil {
		return nil, fmt.Errorf("metricsproxy: authentication and authorization: %w", err)
	}
	target := &url.URL{Scheme: "http", Host: o.Upstream}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			// The caller's token stays here: the node service needs none and logs nothing of it.
			r.Out.Header.Del("Authorization")
		},
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			ResponseHeaderTimeout: 30 * time.Second,
			MaxIdleConns:          2,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			o.Log.Error(err, "node service's metrics unreachable", "upstream", o.Upstream, "path", r.URL.Path)
			http.Error(w, "the node service's metrics are unreachable (is probeshim running? systemctl status probeshim)", http.StatusBadGateway)
		},
	}
	checked, err := filter(o.Log, proxy)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	for _, p := range Paths {
		mux.Handle("GET "+p, checked)
	}
	return mux, nil
}

// TLSConfig is the serving configuration: the certificate files, watched, or a self-signed
// certificate for o.Hosts.
func TLSConfig(ctx context.Context, o Options) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if o.CertFile != "" || o.KeyFile != "" {
		if o.CertFile == "" || o.KeyFile == "" {
			return nil, errors.New("metricsproxy: give both a certificate and a key file, or neither")
		}
		w, err := certwatcher.New(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("metricsproxy: serving certificate: %w", err)
		}
		go func() {
			if err := w.Start(ctx); err != nil {
				o.Log.Error(err, "watching the serving certificate")
			}
		}()
		cfg.GetCertificate = w.GetCertificate
		return cfg, nil
	}
	host, ips, names := "localhost", []net.IP{}, []string{}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	if len(names) > 0 {
		host = names[0]
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, ips, names)
	if err != nil {
		return nil, fmt.Errorf("metricsproxy: self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// Serve serves h over TLS on ln until ctx ends, then shuts down within a few seconds.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, cfg *tls.Config) error {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         cfg,
		ReadHeaderTimeout: 10 * time.Second,
		// Prometheus' default scrape timeout is 10 s; a slow scraper never holds a connection long.
		WriteTimeout:   time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
