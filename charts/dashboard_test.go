// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const dashboardFile = "probeshim/files/grafana/probeshim.json"

type dashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// The dashboard is checked as code: every panel queries something, every query is valid PromQL
// (promtool checks it as a recording rule), and every probeshim metric it names is one the code
// serves (a renamed metric fails here, not on someone's screen).
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || len(d.Panels) < 10 {
		t.Fatalf("dashboard uid %q with %d panels", d.UID, len(d.Panels))
	}
	served := servedMetrics(t)
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
	for i, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for j, tg := range p.Targets {
			q, _ := json.Marshal(tg.Expr)
			fmt.Fprintf(&rules, "  - record: dashboard:panel%d:query%d\n    expr: %s\n", i, j, q)
			for _, m := range unserved(served, tg.Expr) {
				t.Errorf("panel %q queries %s, which no probeshim code serves", p.Title, m)
			}
		}
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtoolPath(t), "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries: %v\n%s", err, out)
	}
}

// servedMetrics are the probeshim_ metric names the code declares (quoted in its Go sources).
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	name := regexp.MustCompile(`"(probeshim_[a-z_]+)"`)
	for _, dir := range []string{"../cluster", "../shim", "../prober", "../internal"} {
		err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range name.FindAllStringSubmatch(string(b), -1) {
				out[m[1]] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !out["probeshim_build_info"] || !out["probeshim_probes_total"] {
		t.Fatalf("the scan of the sources found too little: %d names", len(out))
	}
	return out
}

// unserved are the probeshim metrics expr names that the code does not serve.
func unserved(served map[string]bool, expr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`\bprobeshim_[a-z_]+`).FindAllString(expr, -1) {
		if !served[strings.TrimSuffix(m, "_bucket")] {
			out = append(out, m)
		}
	}
	return out
}
