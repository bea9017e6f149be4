// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/internal/build/ociimage"
)

// kubectlPlugin is `kubectl probeshim`, built for where kubectl runs (users' laptops too), not
// only for the nodes.
var kubectlPlugin = binary{"kubectl-probeshim", "./cluster/cmd/kubectl-probeshim"}

var pluginPlatforms = []ociimage.Platform{
	{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"},
	{OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"},
	{OS: "windows", Arch: "amd64"},
}

// krewManifest is the krew manifest the release fills: plugins/probeshim.yaml in the repository,
// probeshim.yaml in the release.
const krewManifest = "probeshim.yaml"

// defaultDownloadURL is where the release's files are downloaded from, before the version.
const defaultDownloadURL = "https://github.com/probeshim/probeshim/releases/download"

// plugin builds kubectl-probeshim for every platform of pluginPlatforms, archives each as krew
// unpacks it (the binary and LICENSE at the top; a zip on Windows, where tar is not at hand) and
// writes the krew manifest of those archives.
func (r *build) plugin(ctx context.Context) error {
	digests := map[ociimage.Platform]string{}
	for _, p := range pluginPlatforms {
		exe := pluginExe(p)
		bin := filepath.Join(r.tmp, "plugin", p.OS+"-"+p.Arch, exe)
		if err := ociimage.GoBuild(ctx, r.root, kubectlPlugin.pkg, p, r.git, bin); err != nil {
			return err
		}
		files := []tarFile{{name: exe, mode: 0o755, src: bin}, {name: "LICENSE", mode: 0o644, src: filepath.Join(r.root, "LICENSE")}}
		a := artifact{path: filepath.Join(r.out, pluginArchive(p)), typ: cdx.ComponentTypeFile,
			bins: []archBinary{{kubectlPlugin, p}}}
		write := writeTarGzFile
		if p.OS == "windows" {
			write = writeZipFile
		}
		var err error
		if err = write(a.path, files, r.git.Created); err != nil {
			return err
		}
		if digests[p], err = fileSHA256(a.path); err != nil {
			return err
		}
		r.artifacts = append(r.artifacts, a)
	}
	template, err := os.ReadFile(filepath.Join(r.root, "plugins", krewManifest))
	if err != nil {
		return err
	}
	manifest, err := fillKrewManifest(template, r.modVersion, strings.TrimSuffix(r.downloadURL, "/")+"/"+r.modVersion, digests)
	if err != nil {
		return fmt.Errorf("plugins/%s: %w", krewManifest, err)
	}
	return writeFile(filepath.Join(r.out, krewManifest), manifest)
}

// pluginExe is the plugin's file name on p.
func pluginExe(p ociimage.Platform) string {
	if p.OS == "windows" {
		return kubectlPlugin.name + ".exe"
	}
	return kubectlPlugin.name
}

// pluginArchive is the file name of p's archive of the plugin, as the krew manifest names it.
func pluginArchive(p ociimage.Platform) string {
	if p.OS == "windows" {
		return fmt.Sprintf("%s_%s_%s.zip", kubectlPlugin.name, p.OS, p.Arch)
	}
	return fmt.Sprintf("%s_%s_%s.tar.gz", kubectlPlugin.name, p.OS, p.Arch)
}

// fillKrewManifest sets the manifest's version, and each platform's uri (under base) and sha256
// from digests; a platform of the manifest that the release did not build is an error, as is one
// the release built and the manifest lacks (krew would not offer it).
func fillKrewManifest(template []byte, version, base string, digests map[ociimage.Platform]string) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(template, &m); err != nil {
		return nil, err
	}
	spec, _ := m["spec"].(map[string]any)
	platforms, _ := spec["platforms"].([]any)
	if len(platforms) == 0 {
		return nil, fmt.Errorf("no spec.platforms")
	}
	spec["version"] = version
	seen := map[ociimage.Platform]bool{}
	for i, raw := range platforms {
		entry, _ := raw.(map[string]any)
		selector, _ := entry["selector"].(map[string]any)
		labels, _ := selector["matchLabels"].(map[string]any)
		goos, _ := labels["os"].(string)
		arch, _ := labels["arch"].(string)
		p := ociimage.Platform{OS: goos, Arch: arch}
		digest, ok := digests[p]
		if !ok {
			return nil, fmt.Errorf("spec.platforms[%d] is %s, which the release does not build", i, p)
		}
		entry["uri"] = base + "/" + pluginArchive(p)
		entry["sha256"] = digest
		seen[p] = true
	}
	for p := range digests {
		if !seen[p] {
			return nil, fmt.Errorf("no spec.platforms entry for %s", p)
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	header := "# The krew manifest of kubectl probeshim " + version + ", written by make release from\n" +
		"# plugins/probeshim.yaml: kubectl krew install --manifest=probeshim.yaml\n"
	return append([]byte(header), out...), nil
}

// writeZipFile writes files as a zip at dst that depends on nothing but their names, modes and
// contents, as writeTarGz does for tar.
func writeZipFile(dst string, files []tarFile, mtime time.Time) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	for _, tf := range sortedByName(files) {
		data, err := os.ReadFile(tf.src)
		if err != nil {
			f.Close()
			return err
		}
		h := &zip.FileHeader{Name: tf.name, Method: zip.Deflate, Modified: mtime.UTC().Truncate(time.Second)}
		h.SetMode(os.FileMode(tf.mode))
		w, err := zw.CreateHeader(h)
		if err == nil {
			_, err = w.Write(data)
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
