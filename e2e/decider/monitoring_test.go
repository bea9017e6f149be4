// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/probeshim/probeshim/e2e/cluster"
	"github.com/probeshim/probeshim/e2e/framework"
	"github.com/probeshim/probeshim/e2e/prometheus"
	"github.com/probeshim/probeshim/e2e/rig"
)

// nodeMetricsPort is probeshim-metrics.socket's port.
const nodeMetricsPort = "10269"

// alertFor is every alert rule's `for:` in the suite: the shipped expressions, minutes shortened
// to seconds.
const alertFor = 5 * time.Second

// monitoring is what an operator's monitoring sees of the suite: the node's probeshim-metrics on
// the node's address, and a real Prometheus scraping it and the deployment through their
// authentication, with probeshim's alert rules.
type monitoring struct {
	nodeURL  string // https://<node IP>:10269
	dir      string // Prometheus' files
	prom     *prometheus.Server
	timeline *prometheus.Timeline
}

// startMonitoring starts probeshim-metrics for the suite's node service and a Prometheus that
// scrapes it and the deployment at the addresses the chart's ScrapeConfig and ServiceMonitor
// find, with the token of a service account bound to probeshim-metrics-reader.
func (s *suite) startMonitoring(t testing.TB) *monitoring {
	t.Helper()
	listen := net.JoinHostPort(rig.NodeIP, nodeMetricsPort)
	s.c.StartMetricsProxy(t, s.svc, listen)
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := prometheus.Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.Join(root, "charts", "probeshim", "files", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := framework.Context(t, 2*time.Minute)
	token, err := s.metricsToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Debian's Prometheus is built without Kubernetes discovery: the suite lists the addresses it
	// would find (the node's InternalIP at probeshim-metrics' port, the deployment's pods at their
	// metrics port) in file_sd files, refreshed by refreshTargets.
	config := fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 1s
rule_files: [alerts.yaml]
scrape_configs:
- job_name: probeshim-node
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: %[1]s/token}
  file_sd_configs: [{files: [%[1]s/nodes.json], refresh_interval: 1s}]
- job_name: probeshim-cluster
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: %[1]s/token}
  file_sd_configs: [{files: [%[1]s/cluster.json], refresh_interval: 1s}]
`, dir)
	prom, err := prometheus.Start(ctx, s.c.Rig, bin, dir, config, map[string][]byte{
		"token": []byte(token), "alerts.yaml": prometheus.ShortenFor(rules, alertFor)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Stop)
	m := &monitoring{nodeURL: "https://" + listen, dir: dir, prom: prom, timeline: prom.Watch(context.Background())}
	if err := s.refreshTargets(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t.Logf("alert timeline (Prometheus polled every second, rules' for: %s):\n%s", alertFor, m.timeline.Stop())
		if t.Failed() {
			t.Logf("prometheus log:\n%s", prom.Logs(30))
		}
	})
	return m
}

// refreshTargets writes the scrape targets as discovery would find them now: each node at its
// InternalIP and the metrics port, each running pod of the deployment at its IP and 8443.
func (s *suite) refreshTargets(ctx context.Context, m *monitoring) error {
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	nodes, err := s.c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var ng []group
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ng = append(ng, group{[]string{net.JoinHostPort(a.Address, nodeMetricsPort)}, map[string]string{"node": n.Name}})
				break
			}
		}
	}
	pods, err := s.c.Kube.CoreV1().Pods(cluster.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var cg []group
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			cg = append(cg, group{[]string{net.JoinHostPort(p.Status.PodIP, "8443")}, map[string]string{"pod": p.Name}})
		}
	}
	for name, g := range map[string][]group{"nodes.json": ng, "cluster.json": cg} {
		b, err := json.Marshal(g)
		if err != nil {
			return err
		}
		// Written whole and renamed: Prometheus never reads half a file.
		tmp := filepath.Join(m.dir, "."+name)
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(m.dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// waitAlert waits until the alert (name, with {node=...} for a node's) is in state: "firing", or
// "" for inactive (resolved).
func (s *suite) waitAlert(t testing.TB, name, state string, timeout time.Duration) {
	t.Helper()
	t0 := time.Now()
	want := state
	if want == "" {
		want = "inactive"
	}
	err := framework.WaitFor(framework.Context(t, timeout+30*time.Second), timeout, "alert "+name+" "+want, func(context.Context) (bool, string, error) {
		st := s.mon.timeline.State(name)
		return st == state, "state " + st, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("alert %s %s after %s", name, want, time.Since(t0).Round(time.Second))
}

// The node's metrics, as a scraper in the cluster reaches them: refused without a token or
// without the right, served with it (both endpoints); Prometheus scrapes the node and the
// deployment; stopping the node service fires ProbeshimNodeServiceSilent for its node (the
// cluster part's heartbeat sees it) and starting it again resolves it; the breaker's alert, which
// fired in "probe misconfigured for all pods", has resolved once that scenario's pods are gone.
func (s *suite) testMonitoring(t *testing.T) {
	ctx := framework.Context(t, 5*time.Minute)
	token, err := s.metricsToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns := s.c.Namespace(t)
	if _, err := s.c.Kubectl(ctx, "create", "serviceaccount", "nobody", "-n", ns); err != nil {
		t.Fatal(err)
	}
	other, err := s.c.Kubectl(ctx, "create", "token", "nobody", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	// A pod whose probe has run: /metrics/probes has series only while the node probes something,
	// and the pods of the scenarios before may all be gone by now.
	s.barePod(t, appPod(ns, "scraped", true, livenessProbe(failMarker)))
	for _, c := range []struct {
		name, path, token string
		want              int
		body              string
	}{
		{"anonymous", "/metrics", "", http.StatusUnauthorized, ""},
		{"a service account without the right", "/metrics", strings.TrimSpace(other), http.StatusForbidden, ""},
		{"the scraper", "/metrics", token, http.StatusOK, "probeshim_build_info{"},
		{"the scraper, per-container series", "/metrics/probes", token, http.StatusOK, "# HELP prober_probe_total"},
	} {
		code, body, err := s.getHTTPS(ctx, s.mon.nodeURL+c.path, c.token)
		if err != nil || code != c.want || !strings.Contains(body, c.body) {
			t.Errorf("%s: GET %s%s: %d, %v (body %.200q); want %d with %q", c.name, s.mon.nodeURL, c.path, code, err, body, c.want, c.body)
		}
	}

	if err := s.refreshTargets(ctx, s.mon); err != nil {
		t.Fatal(err)
	}
	err = framework.WaitFor(ctx, time.Minute, "Prometheus scraping the node and the deployment", func(ctx context.Context) (bool, string, error) {
		targets, err := s.mon.prom.Targets(ctx)
		if err != nil {
			return false, "", err
		}
		up := map[string]bool{}
		var all []string
		for _, tg := range targets {
			up[tg.Labels["job"]] = up[tg.Labels["job"]] || tg.Health == "up"
			all = append(all, fmt.Sprintf("%s %s %s %s", tg.Labels["job"], tg.ScrapeURL, tg.Health, tg.LastError))
		}
		return up["probeshim-node"] && up["probeshim-cluster"], strings.Join(all, "; "), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	s.waitAlert(t, "ProbeshimCircuitBreakerOpen", "", 3*time.Minute)

	node := s.c.Rig.NodeName()
	silent := "ProbeshimNodeServiceSilent{node=" + node + "}"
	if st := s.mon.timeline.State(silent); st != "" {
		t.Fatalf("%s is %s before the node service stopped", silent, st)
	}
	t0 := time.Now()
	s.svc.Stop()
	restarted := false
	defer func() {
		if !restarted {
			s.svc.Start(t)
		}
	}()
	if code, body, err := s.getHTTPS(ctx, s.mon.nodeURL+"/metrics", token); err != nil || code != http.StatusBadGateway {
		t.Errorf("probeshim-metrics with the node service stopped: %d %.200q, %v; want 502", code, body, err)
	}
	s.waitAlert(t, silent, "firing", 3*time.Minute)
	t.Logf("node service stopped: %s firing %s later (lease grace 40 s, for: %s)", silent, time.Since(t0).Round(time.Second), alertFor)
	s.svc.Start(t)
	restarted = true
	s.waitAlert(t, silent, "", 2*time.Minute)
	s.c.WaitForServed(t, node)
}
