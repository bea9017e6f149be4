// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package config

import (
	"slices"
	"strings"
	"testing"
)

func TestPlanReload(t *testing.T) {
	h := detect("node-a", false)
	running, err := loadOn(t, h, "--config", writeFile(t, "logLevel: info\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file             string
		applied, restartNeeded []string
	}{
		{"nothing changed", "logLevel: info\n", nil, nil},
		{"log level", "logLevel: debug\n", []string{"logLevel"}, nil},
		{"max procs", "maxProcs: -1\n", []string{"maxProcs"}, nil},
		{"kubeconfig", "kubeconfig: /etc/probeshim/other.conf\n", nil, []string{"kubeconfig"}},
		{"nested settings", "probes:\n  maxConcurrentExecs: 64\nheartbeat:\n  namespace: elsewhere\n", nil,
			// The per-namespace share follows the pool's default.
			[]string{"probes.maxConcurrentExecs", "probes.maxConcurrentExecsPerNamespace", "heartbeat.namespace"}},
		{"both kinds", "logLevel: trace\nkubeAPIQPS: 50\n", []string{"logLevel"}, []string{"kubeAPIQPS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := loadOn(t, h, "--config", writeFile(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			before := *running
			r := PlanReload(running, next)
			if !slices.Equal(r.Applied, tc.applied) || !slices.Equal(r.RestartNeeded, tc.restartNeeded) {
				t.Fatalf("applied %q, restart needed %q; want %q, %q", r.Applied, r.RestartNeeded, tc.applied, tc.restartNeeded)
			}
			if *running != before {
				t.Fatal("PlanReload changed the running configuration in place")
			}
			// What runs from now: the new live values, the old values of everything that waits.
			if got := Changed(r.Running, next); !slices.Equal(got, tc.restartNeeded) {
				t.Fatalf("the configuration to run differs from the file in %q, want only %q", got, tc.restartNeeded)
			}
			for _, name := range tc.restartNeeded {
				if r.Running.Value(name) != running.Value(name) {
					t.Errorf("%s: running value %v replaced by %v", name, running.Value(name), r.Running.Value(name))
				}
			}
		})
	}
}

func TestLiveSettingsExist(t *testing.T) {
	c := &Config{}
	for _, name := range LiveSettings {
		if c.Value(name) == nil {
			t.Errorf("LiveSettings names %q, which is no setting", name)
		}
	}
	if c.Value("probes.noSuchSetting") != nil || c.Value("logLevel.x") != nil {
		t.Error("Value of a setting that does not exist is not nil")
	}
	if got := (&Config{Heartbeat: Heartbeat{Namespace: "ns"}}).Value("heartbeat.namespace"); got != "ns" {
		t.Errorf("Value(heartbeat.namespace) = %v", got)
	}
}

func TestChangedCoversEverySetting(t *testing.T) {
	// A setting added to Config is compared too, and named as the file names it.
	a, b := &Config{}, &Config{}
	b.CRIProxy.Enabled, b.Heartbeat.EndpointCAFile, b.Probes.MessageIntervalSeconds = true, "/x", 1
	got := strings.Join(Changed(a, b), ",")
	if got != "criProxy.enabled,probes.messageIntervalSeconds,heartbeat.endpointCAFile" {
		t.Fatalf("Changed = %s", got)
	}
}
