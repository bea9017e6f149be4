// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/charts"
)

// deliberateDefaults are the flags the manifests set to exactly the command's default on purpose,
// and why: each ties the command to other objects of the same manifests, which must not part from
// it should the default ever change. Any other flag at its default is noise to remove: the command's
// defaults are the one source of them.
var deliberateDefaults = map[string]string{
	"metrics-bind-address":       "its port is the container port metrics (values metrics.port), which the metrics Service targets",
	"health-probe-bind-address":  "its port is the container port health, which the readiness and liveness probes call",
	"webhook-port":               "the container port webhook (values webhook.port), which the webhook Service targets",
	"webhook-cert-dir":           "the mount of the certificate volume (cert-manager's Secret with certManager.enabled)",
	"webhook-service-name":       "the Service the webhook configurations call",
	"webhook-secret-name":        "the Secret cert-manager's Certificate writes (certManager.enabled)",
	"webhook-configuration-name": "the name of both webhook configurations",
	"node-group":                 "values nodeIdentity.dedicated.group, the group the nodes' RBAC binds",
	"node-user-prefix":           "values nodeIdentity.dedicated.userPrefix, beside node-group",
}

// The Deployments of cluster/deploy and of the chart (default values, and values that change
// every flag the chart writes) pass only flags the command has, each as --name=value, and none at
// its default but those of deliberateDefaults; deliberateDefaults names only flags some manifest
// sets to its default.
func TestManifestFlags(t *testing.T) {
	manifests := map[string][]string{"cluster/deploy/deployment.yaml": kustomizeArgs(t)}
	for name, vals := range map[string]map[string]any{
		"defaults": nil,
		"other values": {
			"webhook": map[string]any{"port": 9444, "servicePort": 8443,
				"clientAuth": map[string]any{"caConfigMap": "apiserver-client-ca", "names": []any{"apiserver"}}},
			"metrics":            map[string]any{"port": 9090, "secure": false},
			"servedNodeAffinity": "prefer",
			"heartbeatRelay":     map[string]any{"enabled": false},
			"kruise":             map[string]any{"namespace": "example-kruise", "detectPeriod": "0s", "keepPeriod": "5s"},
			"nodeIdentity":       map[string]any{"dedicated": map[string]any{"enabled": false}},
		},
		"metrics off": {"metrics": map[string]any{"port": 0}},
	} {
		manifests["chart, "+name] = chartArgs(t, vals)
	}

	atDefault := map[string]bool{}
	for manifest, args := range manifests {
		fs := commandFlags()
		for _, arg := range args {
			name, value, ok := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			if !ok || !strings.HasPrefix(arg, "--") {
				t.Errorf("%s: %q: write flags as --name=value", manifest, arg)
				continue
			}
			f := fs.Lookup(name)
			if f == nil {
				t.Errorf("%s: --%s: probeshim-cluster has no such flag", manifest, name)
				continue
			}
			if err := f.Value.Set(value); err != nil {
				t.Errorf("%s: --%s=%s: %v", manifest, name, value, err)
				continue
			}
			// Compared as the flag prints it, so 30s and 0h0m30s, true and 1, are one value.
			if f.Value.String() != f.DefValue {
				continue
			}
			atDefault[name] = true
			if _, ok := deliberateDefaults[name]; !ok {
				t.Errorf("%s: --%s=%s is probeshim-cluster's default: remove it from the manifest "+
					"(or list it in deliberateDefaults, saying why it is repeated)", manifest, name, value)
			}
		}
	}
	for name := range deliberateDefaults {
		if !atDefault[name] {
			t.Errorf("deliberateDefaults lists --%s, which no manifest sets to its default: remove it from the list", name)
		}
	}
}

// commandFlags are the flags main parses: the options' and klog's.
func commandFlags() *flag.FlagSet {
	var o options
	fs := flagSet()
	o.bind(fs)
	klog.InitFlags(fs)
	return fs
}

func kustomizeArgs(t *testing.T) []string {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	for _, o := range deployed(t, scheme, "deployment.yaml", "") {
		if d, ok := o.(*appsv1.Deployment); ok {
			return d.Spec.Template.Spec.Containers[0].Args
		}
	}
	t.Fatal("no Deployment in cluster/deploy/deployment.yaml")
	return nil
}

func chartArgs(t *testing.T, vals map[string]any) []string {
	t.Helper()
	rel, err := charts.Render(filepath.Join("..", "..", "..", "charts", "probeshim"), namespace, "v1.37.2", vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(rel.Manifest, "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatal(err)
		}
		if kind.Kind != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	t.Fatal("the chart renders no Deployment")
	return nil
}
