// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package charts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// AppVersion is the chart's appVersion for a package version (packaging/version.sh): "~" becomes "-",
// which makes the SemVer 2 form (0.0.0~git20261129101500.abc1234 -> 0.0.0-git20261129101500.abc1234,
// 1.2.3~rc.1 -> 1.2.3-rc.1; "+" stays, build metadata). The chart's templates turn its "+" into "_"
// for the default image tag and the version label, so that tag is exactly ociimage.Tag of the version.
func AppVersion(version string) string {
	return strings.ReplaceAll(version, "~", "-")
}

// ChartVersion is the chart's version for a package version: AppVersion, but for a numeric
// pre-release identifier with a leading zero, which SemVer forbids and Helm refuses: only an
// all-digit abbreviated commit before the first tag (0.0.0~git<date>.0123456) has one. It is
// prefixed "g", as git describe prefixes commits; appVersion keeps it as it is, for the image tag.
func ChartVersion(version string) string {
	v := AppVersion(version)
	core, build, hasBuild := strings.Cut(v, "+")
	base, pre, hasPre := strings.Cut(core, "-")
	if !hasPre {
		return v
	}
	ids := strings.Split(pre, ".")
	for i, id := range ids {
		if len(id) > 1 && id[0] == '0' && strings.Trim(id, "0123456789") == "" {
			ids[i] = "g" + id
		}
	}
	v = base + "-" + strings.Join(ids, ".")
	if hasBuild {
		v += "+" + build
	}
	return v
}

// Package writes the chart in dir into outDir as <name>-<ChartVersion>.tgz, with version and
// appVersion from the package version, and returns its path. Every file's time is mtime (the
// commit's), so one commit packages to the same bytes: Helm's own packaging stamps the time of
// the run.
func Package(dir, outDir, version string, mtime time.Time) (string, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = ChartVersion(version)
	ch.Metadata.AppVersion = AppVersion(version)
	tmp, err := os.MkdirTemp("", "probeshim-chart-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	saved, err := chartutil.Save(ch, tmp)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := restamp(&out, saved, mtime); err != nil {
		return "", err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(outDir, filepath.Base(saved))
	// Written beside and renamed: a reader never sees half a package.
	if err := os.WriteFile(path+".tmp", out.Bytes(), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(path+".tmp", path)
}

// restamp copies the gzipped tar at path into w with every entry's time set to mtime, keeping
// Helm's gzip header (its Extra field marks a Helm package).
func restamp(w io.Writer, path string, mtime time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(w)
	zw.Header = gzip.Header{Comment: zr.Comment, Extra: zr.Extra, OS: zr.OS}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		h.ModTime, h.AccessTime, h.ChangeTime = mtime.UTC().Truncate(time.Second), time.Time{}, time.Time{}
		h.Format = tar.FormatUSTAR
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
