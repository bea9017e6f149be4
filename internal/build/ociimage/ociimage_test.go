// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/probeshim/probeshim/internal/testkit/kubebin"
)

var created = time.Date(2026, 11, 29, 10, 15, 0, 0, time.UTC)

// fakeSpec is a Spec whose "binaries" are small files, one distinct per platform.
func fakeSpec(t *testing.T) Spec {
	t.Helper()
	dir := t.TempDir()
	s := Spec{Title: "probeshim-cluster", Binary: "/bin/probeshim-cluster", Binaries: map[Platform]string{},
		Version: "1.2.3", Revision: "abc123", Source: SourceURL, Created: created}
	for _, p := range Platforms {
		f := filepath.Join(dir, p.Arch)
		if err := os.WriteFile(f, []byte("binary for "+p.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		s.Binaries[p] = f
	}
	return s
}

func TestBuildIndex(t *testing.T) {
	idx, err := Build(fakeSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", mt, types.OCIImageIndex)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.Annotations[LabelVersion] != "1.2.3" || im.Annotations[LabelRevision] != "abc123" {
		t.Errorf("index annotations %v: want the version and the revision", im.Annotations)
	}
	var got []string
	for _, d := range im.Manifests {
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("%s: manifest media type %s", d.Platform, d.MediaType)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, Platform{d.Platform.OS, d.Platform.Architecture})
	}
	if strings.Join(got, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", got)
	}
}

func checkImage(t *testing.T, img v1.Image, p Platform) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Arch {
		t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532 (non-root, numeric)", p, cf.Config.User)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/bin/probeshim-cluster" {
		t.Errorf("%s: entrypoint %v", p, cf.Config.Entrypoint)
	}
	for k, want := range map[string]string{LabelVersion: "1.2.3", LabelRevision: "abc123", LabelSource: SourceURL,
		LabelCreated: "2026-11-29T10:15:00Z"} {
		if cf.Config.Labels[k] != want {
			t.Errorf("%s: label %s = %q, want %q", p, k, cf.Config.Labels[k], want)
		}
	}
	if !cf.Created.Equal(created) {
		t.Errorf("%s: created %s, want the commit's time %s", p, cf.Created.Time, created)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%s: %d layers, want 1", p, len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("%s: layer media type %s", p, mt)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	contents := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name], contents[h.Name] = h, string(b)
		if !h.ModTime.Equal(created) {
			t.Errorf("%s: %s dated %s, want %s", p, h.Name, h.ModTime, created)
		}
	}
	bin := files["bin/probeshim-cluster"]
	if bin == nil || bin.Mode != 0o755 || contents["bin/probeshim-cluster"] != "binary for "+p.String() {
		t.Errorf("%s: the binary is %+v %q: want this platform's binary, mode 0755", p, bin, contents["bin/probeshim-cluster"])
	}
	if !strings.Contains(contents["etc/passwd"], "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd %q lacks nonroot", p, contents["etc/passwd"])
	}
	// No shell, nothing else on PATH: only the binary is executable.
	for name, h := range files {
		if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 && name != "bin/probeshim-cluster" {
			t.Errorf("%s: unexpected executable %s", p, name)
		}
		if h.Typeflag == tar.TypeSymlink {
			t.Errorf("%s: unexpected symlink %s -> %s", p, name, h.Linkname)
		}
	}
}

func TestBuildReproducible(t *testing.T) {
	spec := fakeSpec(t)
	a, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds of one spec: %s and %s", da, db)
	}
	spec.Created = spec.Created.Add(time.Second)
	c, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if dc, _ := c.Digest(); dc == da {
		t.Errorf("a different creation time gave the same digest %s: the time is not in the image", dc)
	}
}

func TestLayoutAndTar(t *testing.T) {
	idx, err := Build(fakeSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	var tars [2][]byte
	for i := range tars {
		dir := filepath.Join(t.TempDir(), "layout")
		if err := WriteLayout(dir, idx, "1.2.3"); err != nil {
			t.Fatal(err)
		}
		p, err := layout.FromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		top, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		im, err := top.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 1 || im.Manifests[0].Digest != want || im.Manifests[0].Annotations[LabelRefName] != "1.2.3" {
			t.Fatalf("index.json %+v: want our index %s named 1.2.3", im.Manifests, want)
		}
		var buf bytes.Buffer
		if err := TarLayout(&buf, dir, created); err != nil {
			t.Fatal(err)
		}
		tars[i] = buf.Bytes()
	}
	if !bytes.Equal(tars[0], tars[1]) {
		t.Error("two tars of one layout differ")
	}
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(tars[0]))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[h.Name] = true
	}
	for _, n := range []string{"oci-layout", "index.json", "blobs/sha256/" + want.Hex} {
		if !names[n] {
			t.Errorf("the tar lacks %s (has %v)", n, names)
		}
	}
}

func TestTag(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3":                             "1.2.3",
		"0.0.0~git20261129101500.abc1234":   "0.0.0-git20261129101500.abc1234",
		"1.2.3+git20261129101500.3.abc1234": "1.2.3_git20261129101500.3.abc1234",
	} {
		if got := Tag(in); got != want {
			t.Errorf("Tag(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClusterImageFromSource builds the real probeshim-cluster twice from this checkout and wants
// one digest, and runs the binary for its --version. Only the host's platform: a cold arm64 build of
// the cluster part takes minutes on a small machine (make image builds it; TestBuildIndex checks
// that both platforms land in the index). It compiles the whole cluster part twice (60-260 s), so
// make unit leaves it to make integration.
func TestClusterImageFromSource(t *testing.T) {
	if os.Getenv(kubebin.UnitOnlyEnv) != "" {
		t.Skipf("%s is set: this test builds the cluster image from source; make integration runs it", kubebin.UnitOnlyEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	g := Git{Version: "9.8.7", Revision: "0123abc", Created: created}
	host := Platform{runtime.GOOS, runtime.GOARCH}
	var digests []v1.Hash
	var spec Spec
	for range 2 {
		spec, err = ClusterSpec(ctx, root, t.TempDir(), g, []Platform{host})
		if err != nil {
			t.Fatal(err)
		}
		idx, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := idx.Digest()
		digests = append(digests, d)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds from one checkout: %s and %s", digests[0], digests[1])
	}
	bin := spec.Binaries[host]
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	want := "probeshim-cluster 9.8.7 (commit 0123abc of " + created.UTC().Format(time.RFC3339) + ", " + runtime.Version()
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("--version printed %q: want %q, the commit, its date and %s", out, want, runtime.Version())
	}
}
