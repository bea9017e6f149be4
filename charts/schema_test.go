// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/probeshim/probeshim/cluster/decider"
)

// The shipped values.yaml meets values.schema.json.
func TestSchemaTakesShippedValues(t *testing.T) {
	schema, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := chartutil.ValidateAgainstSingleSchema(vals, schema); err != nil {
		t.Errorf("values.yaml does not meet values.schema.json: %v", err)
	}
}

// A wrong value fails `helm install` and `helm template` (Helm validates values against the schema
// before it renders), and the error names the value and what is wrong with it.
func TestSchemaRefusesWrongValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want []string // in the error
	}{
		{"negative replicas", map[string]any{"replicas": -1}, []string{"/replicas", "minimum"}},
		{"no replicas", map[string]any{"replicas": 0}, []string{"/replicas", "minimum"}},
		{"replicas as a string", map[string]any{"replicas": "two"}, []string{"/replicas", "want integer"}},
		{"unknown top-level key", map[string]any{"replica": 3}, []string{"additional properties 'replica' not allowed"}},
		{"unknown nested key", map[string]any{"webhook": map[string]any{"timeout": 5}}, []string{"/webhook", "'timeout' not allowed"}},
		{"bad enum", map[string]any{"servedNodeAffinity": "always"}, []string{"/servedNodeAffinity", "'require', 'prefer', 'off'"}},
		{"bad pull policy", map[string]any{"image": map[string]any{"pullPolicy": "sometimes"}}, []string{"/image/pullPolicy"}},
		{"switch as a string", map[string]any{"certManager": map[string]any{"enabled": "yes"}}, []string{"/certManager/enabled", "want boolean"}},
		{"port out of range", map[string]any{"webhook": map[string]any{"port": 70000}}, []string{"/webhook/port", "maximum"}},
		{"webhook timeout over the API server's 30s", map[string]any{"webhook": map[string]any{"timeoutSeconds": 60}}, []string{"/webhook/timeoutSeconds"}},
		{"bad duration", map[string]any{"kruise": map[string]any{"detectPeriod": "30 seconds"}}, []string{"/kruise/detectPeriod", "does not match pattern"}},
		{"decider share without %", map[string]any{"decider": map[string]any{"defaultMaxUnavailable": "25"}}, []string{"/decider/defaultMaxUnavailable"}},
		{"decider qps 0", map[string]any{"decider": map[string]any{"rateLimit": map[string]any{"qps": 0}}}, []string{"/decider/rateLimit/qps"}},
		{"decider typo", map[string]any{"decider": map[string]any{"dryrun": true}}, []string{"/decider", "'dryrun' not allowed"}},
		{"spread without a key", map[string]any{"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}}},
			[]string{"/topologySpreadConstraints/0", "missing property 'topologyKey'"}},
		{"extra arg not a flag", map[string]any{"extraArgs": []any{"node-service-grace=90s"}}, []string{"/extraArgs/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderErr(tc.vals)
			if err == nil {
				t.Fatalf("rendered with %v", tc.vals)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The decider's values are its defaults (decider.DefaultSettings), as values.yaml says: a default
// changed in the code and not here (or here and not in the code) fails.
func TestDeciderValuesAreTheDefaults(t *testing.T) {
	cm := find(t, render(t, nil), "ConfigMap", decider.ConfigMapName)
	doc, _, _ := unstructured.NestedString(cm.Object, "data", decider.ConfigKey)
	s, err := decider.ParseConfig(doc)
	if err != nil {
		t.Fatal(err)
	}
	if def := decider.DefaultSettings(); !reflect.DeepEqual(s, def) {
		t.Errorf("the chart's decider settings differ from the defaults:\nchart   %+v\ndefault %+v", s, def)
	}
}
