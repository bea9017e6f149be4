// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/internal/build/ociimage"
)

// The repository's manifest, filled: every platform gets its archive's address and digest, and a
// platform on one side only is an error.
func TestFillKrewManifest(t *testing.T) {
	template, err := os.ReadFile(filepath.Join("..", "..", "plugins", krewManifest))
	if err != nil {
		t.Fatal(err)
	}
	digests := map[ociimage.Platform]string{}
	for i, p := range pluginPlatforms {
		digests[p] = strings.Repeat(string(rune('a'+i)), 64)
	}
	out, err := fillKrewManifest(template, "v1.2.3", "https://dl.example/v1.2.3", digests)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Kind string
		Spec struct {
			Version   string
			Platforms []struct {
				Selector struct{ MatchLabels map[string]string }
				URI      string
				SHA256   string
				Bin      string
			}
		}
	}
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Kind != "Plugin" || m.Spec.Version != "v1.2.3" || len(m.Spec.Platforms) != len(pluginPlatforms) {
		t.Fatalf("filled manifest: %+v", m)
	}
	for _, p := range m.Spec.Platforms {
		pl := ociimage.Platform{OS: p.Selector.MatchLabels["os"], Arch: p.Selector.MatchLabels["arch"]}
		if p.URI != "https://dl.example/v1.2.3/"+pluginArchive(pl) || p.SHA256 != digests[pl] || p.Bin == "" {
			t.Errorf("%s: %+v", pl, p)
		}
	}

	extra := map[ociimage.Platform]string{{OS: "plan9", Arch: "386"}: "x"}
	for k, v := range digests {
		extra[k] = v
	}
	if _, err := fillKrewManifest(template, "v1.2.3", "https://dl.example", extra); err == nil || !strings.Contains(err.Error(), "plan9/386") {
		t.Errorf("a platform the manifest lacks: %v", err)
	}
	delete(digests, ociimage.Platform{OS: "windows", Arch: "amd64"})
	if _, err := fillKrewManifest(template, "v1.2.3", "https://dl.example", digests); err == nil || !strings.Contains(err.Error(), "windows/amd64") {
		t.Errorf("a platform the release does not build: %v", err)
	}
}

// A zip depends only on its files: two writes a day apart of the same files are the same bytes,
// and an entry keeps its mode.
func TestZipReproducible(t *testing.T) {
	dir := t.TempDir()
	exe, doc := filepath.Join(dir, "tool.exe"), filepath.Join(dir, "LICENSE")
	for p, data := range map[string]string{exe: "binary", doc: "license"} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files := []tarFile{{name: "tool.exe", mode: 0o755, src: exe}, {name: "LICENSE", mode: 0o644, src: doc}}
	var sums [2][]byte
	for i := range sums {
		p := filepath.Join(dir, "out.zip")
		if err := writeZipFile(p, files, epoch); err != nil {
			t.Fatal(err)
		}
		var err error
		if sums[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		now := time.Now().Add(24 * time.Hour)
		if err := os.Chtimes(exe, now, now); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Error("two zips of the same files differ")
	}
	zr, err := zip.NewReader(bytes.NewReader(sums[0]), int64(len(sums[0])))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 2 || zr.File[0].Name != "LICENSE" || zr.File[1].Name != "tool.exe" || zr.File[1].Mode().Perm() != 0o755 {
		t.Errorf("entries: %+v %+v", zr.File[0].FileHeader, zr.File[1].FileHeader)
	}
}
