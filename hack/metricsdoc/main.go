// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command metricsdoc writes docs/metrics.md, the reference of the metrics the node service and the
// cluster deployment serve, read from the collectors their code registers
// (shim/service.DescribeMetrics, cluster/metrics.Describe). `make generate` runs it. With -check
// it writes nothing and fails when the file is not what it would write, saying which lines differ
// (`make verify-generated`, and this package's test).
//
//	go run ./hack/metricsdoc [-check] [-o docs/metrics.md]
package main

import (
	"bytes"
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"

	clustermetrics "github.com/probeshim/probeshim/cluster/metrics"
	"github.com/probeshim/probeshim/internal/build/gendoc"
	"github.com/probeshim/probeshim/internal/build/metricsref"
	"github.com/probeshim/probeshim/shim/service"
)

func main() {
	gendoc.Main("metricsdoc", "docs/metrics.md", render)
}

// checkDoc fails when path is not what render writes.
func checkDoc(path string) error {
	want, err := render()
	if err != nil {
		return err
	}
	return gendoc.Check(path, want)
}

// page is the layout and the prose around the tables.
//
//go:embed metrics.md.tmpl
var page string

// render writes the reference: page, with a table of each endpoint's families.
func render() ([]byte, error) {
	node, probes, cluster := metricsref.NewRegistry(), metricsref.NewRegistry(), metricsref.NewRegistry()
	if err := service.DescribeMetrics(node, probes); err != nil {
		return nil, err
	}
	if err := clustermetrics.Describe(cluster); err != nil {
		return nil, err
	}
	data := map[string][]metricsref.Family{}
	var all []metricsref.Family
	for name, reg := range map[string]*metricsref.Registry{"Node": node, "Probes": probes, "Cluster": cluster} {
		fams, err := reg.Families()
		if err != nil {
			return nil, err
		}
		data[name] = fams
		all = append(all, fams...)
	}
	// The prose names some metrics, or their prefix: each must still be registered.
	for _, m := range regexp.MustCompile("`((probeshim|prober)_[a-z_]+)").FindAllStringSubmatch(page, -1) {
		if !slices.ContainsFunc(all, func(f metricsref.Family) bool { return strings.HasPrefix(f.Name, m[1]) }) {
			return nil, fmt.Errorf("metrics.md.tmpl names %s, which no binary registers", m[1])
		}
	}
	t, err := template.New("page").Option("missingkey=error").Funcs(template.FuncMap{"table": table}).Parse(page)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err = t.Execute(&b, data)
	return b.Bytes(), err
}

// table is a Markdown table of fams.
func table(fams []metricsref.Family) string {
	var b strings.Builder
	b.WriteString("| Metric | Type | Labels | Help |\n|---|---|---|---|")
	for _, f := range fams {
		labels := "(none)"
		if len(f.Labels) > 0 {
			labels = "`" + strings.Join(f.Labels, "`, `") + "`"
		}
		// One line, no column separator.
		help := strings.ReplaceAll(strings.ReplaceAll(f.Help, "|", `\|`), "\n", " ")
		fmt.Fprintf(&b, "\n| `%s` | %s | %s | %s |", f.Name, f.Type, labels, help)
	}
	return b.String()
}
