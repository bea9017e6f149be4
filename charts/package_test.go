// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/probeshim/probeshim/internal/build/ociimage"
)

// Every form packaging/version.sh prints maps to a version Helm takes, and to an appVersion whose
// image tag is the one make image gives the same version (ociimage.Tag) and fits a label value.
func TestVersions(t *testing.T) {
	for _, tc := range []struct{ version, chart string }{
		{"1.2.3", "1.2.3"},
		{"1.2.3+git20261129101500.3.abc1234", "1.2.3+git20261129101500.3.abc1234"},
		{"1.2.3+git20261129101500.dirty", "1.2.3+git20261129101500.dirty"},
		{"1.2.3~rc.1", "1.2.3-rc.1"},
		{"1.2.3~rc.1+git20261129101500.2.abc1234.dirty", "1.2.3-rc.1+git20261129101500.2.abc1234.dirty"},
		{"0.0.0~git20261129101500.abc1234", "0.0.0-git20261129101500.abc1234"},
		{"0.0.0~git20261129101500.abc1234.dirty", "0.0.0-git20261129101500.abc1234.dirty"},
		// An all-digit commit with a leading zero is no SemVer identifier.
		{"0.0.0~git20261129101500.0123456", "0.0.0-git20261129101500.g0123456"},
		{"0.0.0~git00000000000000.uncommitted", "0.0.0-git00000000000000.uncommitted"},
	} {
		if got := ChartVersion(tc.version); got != tc.chart {
			t.Errorf("ChartVersion(%s) = %s, want %s", tc.version, got, tc.chart)
		}
		if _, err := semver.StrictNewVersion(ChartVersion(tc.version)); err != nil {
			t.Errorf("ChartVersion(%s) = %s: %v", tc.version, ChartVersion(tc.version), err)
		}
		dir := t.TempDir()
		path, err := Package(chartDir, dir, tc.version, time.Unix(1764410100, 0))
		if err != nil {
			t.Fatalf("%s: %v", tc.version, err)
		}
		rel, err := Render(path, namespace, kubeVersion, map[string]any{"image": map[string]any{"repository": "r.example/x"}})
		if err != nil {
			t.Fatalf("%s: %v", tc.version, err)
		}
		c := container(t, decode(t, rel.Manifest))
		if want := "r.example/x:" + ociimage.Tag(tc.version); c["image"] != want {
			t.Errorf("%s: image %v, want %s", tc.version, c["image"], want)
		}
		for _, o := range decode(t, rel.Manifest) {
			for k, v := range o.GetLabels() {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Errorf("%s: %s: label %s=%s: %v", tc.version, key(o), k, v, errs)
				}
			}
		}
	}
}

// make chart's package carries the version from git, and a second packaging of the same commit
// gives the same bytes.
func TestPackageFromGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipped: no git")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("skipped: not a git checkout")
	}
	g, err := ociimage.FromGit(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Package(chartDir, t.TempDir(), g.Version, g.Created)
	if err != nil {
		t.Fatal(err)
	}
	// A second run a second later, as a rebuild would be: this measures that the clock does not reach the package.
	time.Sleep(1100 * time.Millisecond)
	b, err := Package(chartDir, t.TempDir(), g.Version, g.Created)
	if err != nil {
		t.Fatal(err)
	}
	if want := "probeshim-" + ChartVersion(g.Version) + ".tgz"; filepath.Base(a) != want {
		t.Errorf("packaged as %s, want %s", filepath.Base(a), want)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("two packagings of one commit differ")
	}
	ch, err := loader.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != ChartVersion(g.Version) || ch.Metadata.AppVersion != AppVersion(g.Version) {
		t.Errorf("packaged version %s, appVersion %s; want %s, %s from git (%s)",
			ch.Metadata.Version, ch.Metadata.AppVersion, ChartVersion(g.Version), AppVersion(g.Version), g.Version)
	}
	if len(ch.Templates) == 0 || len(ch.Files) == 0 {
		t.Errorf("the package lacks the templates or the files")
	}
	zr, err := gzip.NewReader(bytes.NewReader(ab))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(g.Created) {
			t.Errorf("%s: time %s, want the commit's %s", h.Name, h.ModTime, g.Created)
		}
	}
}

// The chart in git says it is not a release: its version is replaced when it is packaged.
func TestChartInGitIsUnversioned(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "0.0.0-dev" || ch.AppVersion() != "0.0.0-dev" {
		t.Errorf("Chart.yaml: version %s, appVersion %s; want 0.0.0-dev (make chart sets both from git)", ch.Metadata.Version, ch.AppVersion())
	}
}
