// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/rig"
)

// The deployment's /metrics is HTTPS and answers only callers the API server authenticates and
// authorizes for GET /metrics (cluster/deploy binds nobody: a scraper is bound to the ClusterRole
// probeshim-metrics-reader). The suite scrapes as a service account bound so.
const scraper = "probeshim-e2e-scraper"

var scrapeToken struct {
	once  sync.Once
	token string
	err   error
}

// metricsToken is a token of a service account allowed to scrape, made once per run.
func (s *suite) metricsToken(ctx context.Context) (string, error) {
	scrapeToken.once.Do(func() {
		for _, args := range [][]string{
			{"create", "serviceaccount", scraper, "-n", cluster.Namespace},
			{"create", "clusterrolebinding", scraper, "--clusterrole=probeshim-metrics-reader",
				"--serviceaccount=" + cluster.Namespace + ":" + scraper},
		} {
			if out, err := s.c.Kubectl(ctx, args...); err != nil && !strings.Contains(out, "AlreadyExists") {
				scrapeToken.err = err
				return
			}
		}
		out, err := s.c.Kubectl(ctx, "create", "token", scraper, "-n", cluster.Namespace, "--duration=2h")
		scrapeToken.token, scrapeToken.err = strings.TrimSpace(out), err
	})
	return scrapeToken.token, scrapeToken.err
}

// scrape GETs https://<pod IP>:8443/metrics inside the rig with token ("" for none) and returns
// the status code and body. The certificate is self-signed: the caller is what is checked.
func (s *suite) scrape(ctx context.Context, pod, token string) (int, string, error) {
	p, err := s.c.Kube.CoreV1().Pods(cluster.Namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return 0, "", err
	}
	return s.getHTTPS(ctx, "https://"+net.JoinHostPort(p.Status.PodIP, "8443")+"/metrics", token)
}

// getHTTPS GETs url inside the rig with token ("" for none), not verifying the server's
// certificate (self-signed: the caller is what is checked), and returns the status and body.
func (s *suite) getHTTPS(ctx context.Context, url, token string) (int, string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return rig.DialNetNS(ctx, s.c.NetNSPath(), network, addr)
		},
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed; the token is what counts
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metric reads a sample of the deployment's /metrics from pod: the value of the first line
// starting with name (with its labels).
func (s *suite) metric(ctx context.Context, pod, name string) (float64, bool, error) {
	token, err := s.metricsToken(ctx)
	if err != nil {
		return 0, false, err
	}
	code, out, err := s.scrape(ctx, pod, token)
	if err != nil {
		return 0, false, err
	}
	if code != http.StatusOK {
		return 0, false, fmt.Errorf("GET /metrics: %d %s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
			return v, err == nil, err
		}
	}
	return 0, false, nil
}

// Without a token, or with one the API server does not authorize for /metrics, the endpoint
// answers nothing; a scraper bound to probeshim-metrics-reader reads it.
func (s *suite) testMetricsAuth(t *testing.T) {
	ctx := framework.Context(t, time.Minute)
	leader, err := s.leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := s.scrape(ctx, leader.Name, ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("anonymous scrape: %d, %v; want 401", code, err)
	}
	ns := s.c.Namespace(t)
	if _, err := s.c.Kubectl(ctx, "create", "serviceaccount", "nobody", "-n", ns); err != nil {
		t.Fatal(err)
	}
	other, err := s.c.Kubectl(ctx, "create", "token", "nobody", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := s.scrape(ctx, leader.Name, strings.TrimSpace(other)); err != nil || code != http.StatusForbidden {
		t.Errorf("scrape by a service account not bound to probeshim-metrics-reader: %d, %v; want 403", code, err)
	}
	s.checkMetric(t, "probeshim_decider_config_valid", func(v float64) bool { return v == 1 }, "1")
}
