// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package v1alpha1_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/apis/v1alpha1"
)

// loadCRD reads a generated CRD strictly, so a field the API type does not know fails the test.
func loadCRD(t *testing.T, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "crds", v1alpha1.GroupName+"_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatalf("%s: %v", plural, err)
	}
	return crd
}

type column struct{ name, jsonPath string }

func TestCRDs(t *testing.T) {
	cases := []struct {
		plural, kind, short string
		scope               apiextensionsv1.ResourceScope
		columns             []column
		versions            []string // served; the first is stored
	}{
		{"podprobemarkers", "PodProbeMarker", "ppm", apiextensionsv1.NamespaceScoped, []column{
			{"Matched", ".status.matchedPods"},
			{"Dry-Run", `.metadata.annotations.probeshim\.io/dry-run`},
			{"Results", `.metadata.annotations.probeshim\.io/results-summary`},
			{"Unprobed", `.metadata.annotations.probeshim\.io/unprobed`},
			{"Age", ".metadata.creationTimestamp"}, {"Selector", ".spec.selector"}}, []string{"v1alpha1"}},
		{"nodepodprobes", "NodePodProbe", "npp", apiextensionsv1.ClusterScoped, []column{
			{"Node-Service", `.metadata.annotations.probeshim\.io/node-service`},
			{"Since", `.metadata.annotations.probeshim\.io/node-service-since`},
			{"Age", ".metadata.creationTimestamp"}}, []string{"v1alpha1"}},
		{"containerrecreaterequests", "ContainerRecreateRequest", "crr", apiextensionsv1.NamespaceScoped, []column{
			{"Phase", ".status.phase"}, {"Pod", ".spec.podName"},
			{"Node", `.metadata.labels.crr\.apps\.kruise\.io/node-name`}, {"Age", ".metadata.creationTimestamp"},
			{"Message", ".status.message"}}, []string{"v1alpha1", "v1beta1"}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[v1alpha1.GroupName+"_"+tc.plural+".yaml"] = true
		t.Run(tc.kind, func(t *testing.T) {
			crd := loadCRD(t, tc.plural)
			if crd.Name != tc.plural+"."+v1alpha1.GroupName || crd.Spec.Group != v1alpha1.GroupName {
				t.Errorf("name %s, group %s", crd.Name, crd.Spec.Group)
			}
			n := crd.Spec.Names
			if n.Kind != tc.kind || n.Plural != tc.plural || !reflect.DeepEqual(n.ShortNames, []string{tc.short}) {
				t.Errorf("names %+v, want kind %s, plural %s, short name %s", n, tc.kind, tc.plural, tc.short)
			}
			if crd.Spec.Scope != tc.scope {
				t.Errorf("scope %s, want %s", crd.Spec.Scope, tc.scope)
			}
			if len(crd.Spec.Versions) != len(tc.versions) {
				t.Fatalf("%d versions, want %v", len(crd.Spec.Versions), tc.versions)
			}
			for i, v := range crd.Spec.Versions {
				if v.Name != tc.versions[i] || !v.Served || v.Storage != (i == 0) {
					t.Errorf("version %s served=%v storage=%v, want %s served, stored: %v", v.Name, v.Served, v.Storage, tc.versions[i], i == 0)
				}
				if v.Subresources == nil || v.Subresources.Status == nil {
					t.Errorf("%s: no status subresource: the node service and controllers write status separately from spec", v.Name)
				}
				var got []column
				for _, c := range v.AdditionalPrinterColumns {
					got = append(got, column{c.Name, c.JSONPath})
				}
				if !reflect.DeepEqual(got, tc.columns) {
					t.Errorf("%s: printer columns %v, want %v", v.Name, got, tc.columns)
				}
				if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
					t.Fatalf("%s: no schema", v.Name)
				}
				// A newer version may change the status, never the spec (OpenKruise's v1beta1
				// ContainerRecreateRequest keeps v1alpha1's): manifests move across unchanged.
				if first := crd.Spec.Versions[0].Schema.OpenAPIV3Schema; !reflect.DeepEqual(v.Schema.OpenAPIV3Schema.Properties["spec"], first.Properties["spec"]) {
					t.Errorf("%s: the spec's schema differs from %s's", v.Name, crd.Spec.Versions[0].Name)
				}
			}
		})
	}

	// Every generated file is covered above.
	files, _ := filepath.Glob(filepath.Join("..", "crds", "*.yaml"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s is not checked by this test", f)
		}
	}
}

// schemaAt walks properties (and array items) along a dotted path.
func schemaAt(t *testing.T, s apiextensionsv1.JSONSchemaProps, path string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, p := range strings.Split(path, ".") {
		if p == "[]" {
			if s.Items == nil || s.Items.Schema == nil {
				t.Fatalf("%s: not an array", path)
			}
			s = *s.Items.Schema
			continue
		}
		next, ok := s.Properties[p]
		if !ok {
			t.Fatalf("%s: no property %q", path, p)
		}
		s = next
	}
	return s
}

func enum(s apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, e := range s.Enum {
		out = append(out, strings.Trim(string(e.Raw), `"`))
	}
	return out
}

// The schema rejects what it can by itself; the rest is the validation package's job.
func TestCRDSchemaValidation(t *testing.T) {
	root := func(plural string) apiextensionsv1.JSONSchemaProps {
		return *loadCRD(t, plural).Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	ppm, npp, crr := root("podprobemarkers"), root("nodepodprobes"), root("containerrecreaterequests")

	requires := func(s apiextensionsv1.JSONSchemaProps, path string, fields ...string) {
		t.Helper()
		got := schemaAt(t, s, path).Required
		for _, f := range fields {
			if !slices.Contains(got, f) {
				t.Errorf("%s: %q not required (required: %v)", path, f, got)
			}
		}
	}
	requires(ppm, "spec", "selector", "probes")
	requires(ppm, "spec.probes.[]", "name", "containerName", "probe")
	requires(ppm, "spec.probes.[].markerPolicy.[]", "state")
	requires(npp, "spec.podProbes.[]", "name", "namespace", "uid", "IP")
	requires(npp, "status.podProbeStatuses.[].probeStates.[]", "name", "state")
	requires(crr, "spec", "podName", "containers")
	requires(crr, "status", "phase")
	for _, s := range []apiextensionsv1.JSONSchemaProps{ppm, crr} {
		if !slices.Contains(s.Required, "spec") {
			t.Errorf("spec not required: %v", s.Required)
		}
	}

	enums := []struct {
		s    apiextensionsv1.JSONSchemaProps
		path string
		want []string
	}{
		{ppm, "spec.probes.[].markerPolicy.[].state", []string{"Succeeded", "Failed"}},
		{npp, "status.podProbeStatuses.[].probeStates.[].state", []string{"Succeeded", "Failed", "Unknown"}},
		{crr, "spec.strategy.failurePolicy", []string{"Fail", "Ignore"}},
		{crr, "status.phase", []string{"Pending", "Recreating", "Completed"}},
		{crr, "status.containerRecreateStates.[].phase", []string{"Pending", "Recreating", "Succeeded", "Failed"}},
	}
	for _, e := range enums {
		if got := enum(schemaAt(t, e.s, e.path)); !reflect.DeepEqual(got, e.want) {
			t.Errorf("%s: enum %v, want %v", e.path, got, e.want)
		}
	}

	// Lists keyed like maps: the API server rejects duplicate keys, and server-side apply can
	// change one entry without rewriting the list.
	mapKeys := []struct {
		s    apiextensionsv1.JSONSchemaProps
		path string
		key  string
	}{
		{ppm, "spec.probes", "name"},
		{ppm, "spec.probes.[].markerPolicy", "state"},
		{npp, "spec.podProbes", "uid"},
		{npp, "spec.podProbes.[].probes", "name"},
		{npp, "status.podProbeStatuses", "uid"},
		{npp, "status.podProbeStatuses.[].probeStates", "name"},
		{crr, "spec.containers", "name"},
		{crr, "status.containerRecreateStates", "name"},
	}
	for _, m := range mapKeys {
		s := schemaAt(t, m.s, m.path)
		if s.XListType == nil || *s.XListType != "map" || !reflect.DeepEqual(s.XListMapKeys, []string{m.key}) {
			t.Errorf("%s: list type %v keys %v, want map keyed by %s", m.path, s.XListType, s.XListMapKeys, m.key)
		}
	}

	if s := schemaAt(t, ppm, "spec.probes"); s.MinItems == nil || *s.MinItems != 1 {
		t.Error("spec.probes: minItems is not 1")
	}
	if s := schemaAt(t, crr, "spec.containers"); s.MinItems == nil || *s.MinItems != 1 {
		t.Error("spec.containers: minItems is not 1")
	}
	if s := schemaAt(t, ppm, "spec.probes.[].name"); s.Pattern != "^[^#]+$" || s.MinLength == nil || *s.MinLength != 1 {
		t.Errorf("spec.probes[].name: pattern %q minLength %v", s.Pattern, s.MinLength)
	}
	minimums := []struct {
		s    apiextensionsv1.JSONSchemaProps
		path string
		min  float64
	}{
		{crr, "spec.activeDeadlineSeconds", 3},
		{crr, "spec.ttlSecondsAfterFinished", 0},
		{crr, "spec.strategy.terminationGracePeriodSeconds", 0},
		{crr, "spec.strategy.unreadyGracePeriodSeconds", 0},
		{crr, "spec.strategy.minStartedSeconds", 0},
		{crr, "spec.containers.[].statusContext.restartCount", 0},
	}
	for _, m := range minimums {
		if s := schemaAt(t, m.s, m.path); s.Minimum == nil || *s.Minimum != m.min {
			t.Errorf("%s: minimum %v, want %v", m.path, s.Minimum, m.min)
		}
	}

	// CEL rules stay off anything inside an unbounded list: the API server rejects a CRD whose
	// estimated rule cost is too high (a one-handler rule on every probe was 8.7 times over budget
	// on kube-apiserver v1.37), so those checks live in the validation package.
	sel := schemaAt(t, ppm, "spec.selector")
	var rules []string
	for _, r := range sel.XValidations {
		rules = append(rules, r.Rule)
	}
	if len(rules) != 2 || !strings.Contains(rules[0], "size(self.matchLabels) > 0") || rules[1] != "self == oldSelf" {
		t.Errorf("spec.selector rules %q, want non-empty and immutable", rules)
	}

	// The probe is corev1.Probe inline: every handler, gRPC included, with ports as int-or-string.
	for _, h := range []string{"exec", "httpGet", "tcpSocket", "grpc"} {
		schemaAt(t, ppm, "spec.probes.[].probe."+h)
		schemaAt(t, npp, "spec.podProbes.[].probes.[].probe."+h)
	}
	if s := schemaAt(t, ppm, "spec.probes.[].probe.httpGet.port"); !s.XIntOrString {
		t.Error("httpGet.port is not int-or-string")
	}
}
