// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const (
	alertsFile     = "probeshim/files/prometheus/alerts.yaml"
	alertTestsFile = "promtool/alerts_test.yaml"
	runbooks       = "../docs/runbooks.md"
	runbookBase    = "https://github.com/probeshim/probeshim/blob/main/docs/runbooks.md#"
)

type ruleGroups struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// The alerts pass promtool's check and their unit tests (promtool test rules), every alert is
// tested firing, and every alert's runbook_url leads to a section of docs/runbooks.md.
func TestAlerts(t *testing.T) {
	promtool := promtoolPath(t)
	for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", alertTestsFile}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	var rules ruleGroups
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	book, err := os.ReadFile(runbooks)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\w+)$`).FindAllStringSubmatch(string(book), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	n := 0
	served := servedMetrics(t)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			for _, m := range unserved(served, r.Expr) {
				t.Errorf("%s queries %s, which no probeshim code serves", r.Alert, m)
			}
			url := r.Annotations["runbook_url"]
			if want := runbookBase + strings.ToLower(r.Alert); url != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, url, want)
			}
			if !sections[strings.ToLower(r.Alert)] {
				t.Errorf("%s: no section \"## %s\" in %s", r.Alert, r.Alert, runbooks)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", r.Alert)
			}
			if !regexp.MustCompile(`alertname: ` + r.Alert + `\n\s+exp_alerts:\n\s+- exp_labels`).Match(tests) {
				t.Errorf("%s: no test in %s sees it fire", r.Alert, alertTestsFile)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d alerts in %s", n, alertsFile)
	}
}

// promtoolPath is $PROBESHIM_PROMTOOL, else what hack/promtool.sh unpacks (make unit sets the former).
func promtoolPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROBESHIM_PROMTOOL"); p != "" {
		return p
	}
	out, err := exec.Command(filepath.Join("..", "hack", "promtool.sh")).Output()
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("skipped: not root, and hack/promtool.sh could not unpack promtool: %v", err)
		}
		t.Fatalf("hack/promtool.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// monitoring.enabled renders a PrometheusRule and a ServiceMonitor that prometheus-operator's own
// types read strictly, with the alerts' runbooks where runbookBaseURL says, and the metrics
// Service the monitor selects.
func TestMonitoringValues(t *testing.T) {
	if objs := render(t, nil); len(filter(objs, "PrometheusRule")) != 0 || len(filter(objs, "ServiceMonitor")) != 0 {
		t.Fatal("monitoring objects rendered by default")
	}
	objs := render(t, map[string]any{"monitoring": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus"},
		"runbookBaseURL": "https://wiki.example/probeshim", "prometheusServiceAccount": map[string]any{"name": "prometheus-k8s", "namespace": "monitoring"}}})
	var rule monitoringv1.PrometheusRule
	strict(t, find(t, objs, "PrometheusRule", "probeshim"), &rule)
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if want := "https://wiki.example/probeshim#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if r.Alert == "ProbeshimNodeServiceSilent" && !strings.Contains(r.Annotations["summary"], "{{ $labels.node }}") {
				t.Errorf("the alert's template was rendered by Helm: %q", r.Annotations["summary"])
			}
		}
	}
	if alerts < 10 || rule.Labels["release"] != "kube-prometheus" {
		t.Errorf("%d alerts, labels %v", alerts, rule.Labels)
	}
	var sm monitoringv1.ServiceMonitor
	strict(t, find(t, objs, "ServiceMonitor", "probeshim-cluster"), &sm)
	svc := find(t, objs, "Service", "probeshim-metrics")
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, the metrics Service has %q", k, v, svc.GetLabels()[k])
		}
	}
	if ep := sm.Spec.Endpoints; len(ep) != 1 || ep[0].Port != "metrics" || ep[0].Scheme == nil || *ep[0].Scheme != "https" {
		t.Errorf("endpoints %+v", ep)
	}
	if b := find(t, objs, "ClusterRoleBinding", "probeshim-metrics-reader-prometheus"); !strings.Contains(fmt.Sprint(b.Object["subjects"]), "prometheus-k8s") {
		t.Errorf("binding subjects %v", b.Object["subjects"])
	}
	cm := find(t, objs, "ConfigMap", "probeshim-dashboard")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v", cm.GetLabels())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "probeshim.json")
	if want, _ := os.ReadFile(dashboardFile); strings.TrimSpace(data) != strings.TrimSpace(string(want)) {
		t.Errorf("the dashboard ConfigMap does not hold %s as it is", dashboardFile)
	}
	if len(filter(objs, "ScrapeConfig")) != 0 {
		t.Error("a ScrapeConfig for the nodes rendered without monitoring.nodes.enabled")
	}
	nodes := render(t, map[string]any{"monitoring": map[string]any{"enabled": true,
		"nodes": map[string]any{"enabled": true, "nodeSelector": map[string]any{"example.com/pool": "probed"}}}})
	var sc monitoringv1alpha1.ScrapeConfig
	strict(t, find(t, nodes, "ScrapeConfig", "probeshim-nodes"), &sc)
	if a := sc.Spec.Authorization; a == nil || a.Credentials == nil || a.Credentials.Name != "probeshim-node-scraper-token" {
		t.Errorf("the node ScrapeConfig's credentials: %+v", a)
	} else if s := find(t, nodes, "Secret", a.Credentials.Name); s.GetAnnotations()["kubernetes.io/service-account.name"] != "probeshim-node-scraper" {
		t.Errorf("the token Secret is not the scraper's: %v", s.GetAnnotations())
	}
	if b := find(t, nodes, "ClusterRoleBinding", "probeshim-metrics-reader-node-scraper"); !strings.Contains(fmt.Sprint(b.Object["subjects"]), "probeshim-node-scraper") {
		t.Errorf("node scraper binding subjects %v", b.Object["subjects"])
	}
	if b, _ := json.Marshal(sc.Spec.RelabelConfigs); !strings.Contains(string(b), "__meta_kubernetes_node_label_example_com_pool") || !strings.Contains(string(b), "${1}:10269") {
		t.Errorf("relabelings %s: want the node selector kept and port 10269", b)
	}
	if _, err := renderErr(map[string]any{"monitoring": map[string]any{"enabled": true}, "metrics": map[string]any{"port": 0}}); err == nil ||
		!strings.Contains(err.Error(), "metrics.port") {
		t.Errorf("monitoring without a metrics port rendered: %v", err)
	}
}

func filter(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// strict decodes o into typed, refusing fields the type does not know.
func strict(t *testing.T, o *unstructured.Unstructured, typed any) {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, typed); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
}
