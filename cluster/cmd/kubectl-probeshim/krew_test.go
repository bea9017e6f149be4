// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The krew manifest names this command's binary on every platform, and every platform has the
// fields the release fills.
func TestKrewManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "plugins", "probeshim.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// kubectl finds kubectl-<name> on PATH; krew installs the plugin under metadata.name.
	if m.Kind != "Plugin" || m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Metadata.Name != "probeshim" ||
		!strings.HasPrefix(m.Spec.Version, "v") || len(m.Spec.Platforms) == 0 {
		t.Fatalf("manifest: %+v", m)
	}
	for _, p := range m.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		bin := "kubectl-probeshim"
		if goos == "windows" {
			bin += ".exe"
		}
		if p.Bin != bin || len(p.SHA256) != 64 || !strings.Contains(p.URI, "/"+m.Spec.Version+"/kubectl-probeshim_"+goos+"_"+arch+".") ||
			len(p.Files) == 0 || p.Files[0].From != bin {
			t.Errorf("platform %s/%s: %+v", goos, arch, p)
		}
	}
}
