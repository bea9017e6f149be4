// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package decider

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The ConfigMap shipped in cluster/deploy spells out the defaults: it parses, and to exactly
// what no ConfigMap gives.
func TestShippedConfigIsTheDefault(t *testing.T) {
	raw, err := os.ReadFile("../deploy/decider-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name != ConfigMapName {
		t.Errorf("shipped ConfigMap is named %q, the decider reads %q", cm.Name, ConfigMapName)
	}
	s, err := ParseConfig(cm.Data[ConfigKey])
	if err != nil {
		t.Fatal(err)
	}
	if def := DefaultSettings(); !reflect.DeepEqual(s, def) {
		t.Errorf("shipped settings differ from the defaults:\nshipped %+v\ndefault %+v", s, def)
	}
}

func TestParseConfig(t *testing.T) {
	s, err := ParseConfig(`
enabled: false
dryRun: true
rateLimit: {qps: 0.5, burst: 1}
defaultMaxUnavailable: 2
circuitBreaker: {failingShare: 30%, minFailingPods: 3}
backoff: {initial: 1s, max: 1m, resetAfter: 2m}
requestTTL: 1h
blacklist:
  namespaces: [kube-system]
  selectors: ["tier in (db)"]
  workloads: [StatefulSet/shop/db]
`)
	if err != nil {
		t.Fatal(err)
	}
	if s.Enabled || !s.DryRun || s.QPS != 0.5 || s.Burst != 1 || s.DefaultMaxUnavailable.IntValue() != 2 ||
		s.FailingShare.String() != "30%" || s.MinFailingPods != 3 || s.BackoffInitial != time.Second ||
		s.BackoffMax != time.Minute || s.BackoffResetAfter != 2*time.Minute || s.RequestTTL != time.Hour {
		t.Errorf("parsed %+v", s)
	}
	if s.blacklisted(Workload{"StatefulSet", "shop", "db"}, nil) == "" ||
		s.blacklisted(Workload{"Deployment", "kube-system", "dns"}, nil) == "" ||
		s.blacklisted(Workload{"Deployment", "shop", "cart"}, map[string]string{"tier": "db"}) == "" {
		t.Error("a blacklist entry does not hold")
	}
	if why := s.blacklisted(Workload{"Deployment", "shop", "cart"}, map[string]string{"tier": "web"}); why != "" {
		t.Errorf("not on the blacklist, but: %s", why)
	}
}

// Every mistake is named with its field, all at once, and nothing is half applied.
func TestParseConfigErrors(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"enabeld: false", `unknown field "enabeld"`},
		{"rateLimit: {qps: 0}", "rateLimit.qps: must be greater than 0"},
		{"rateLimit: {burst: 0}", "rateLimit.burst"},
		{"defaultMaxUnavailable: 150%", "defaultMaxUnavailable"},
		{"defaultMaxUnavailable: lots", "defaultMaxUnavailable"},
		{"circuitBreaker: {failingShare: 3}", `give a percentage such as "50%"`},
		{"backoff: {initial: 1m, max: 10s}", "backoff.max"},
		{"requestTTL: 1s", "requestTTL"},
		{"blacklist: {selectors: ['a in (']}", "blacklist.selectors[0]"},
		{"blacklist: {selectors: ['']}", "selects every pod"},
		{"blacklist: {workloads: [web]}", "blacklist.workloads[0]"},
	}
	for _, tt := range tests {
		_, err := ParseConfig(tt.doc)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one containing %q", tt.doc, err, tt.want)
		}
	}
	_, err := ParseConfig("rateLimit: {qps: -1, burst: 0}")
	if err == nil || !strings.Contains(err.Error(), "qps") || !strings.Contains(err.Error(), "burst") {
		t.Errorf("both mistakes at once: %v", err)
	}
}
