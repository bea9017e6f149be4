// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package ociimage builds probeshim's container images as OCI image indexes with
// go-containerregistry: one image per platform, each a single layer holding a static binary, the
// /etc/passwd and /etc/group entries of a non-root user and nothing else (no shell, no package
// manager). Every timestamp is Spec.Created, so equal inputs give the same digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user every image runs as (distroless's "nonroot").
const NonRoot = 65532

// OCI annotation and label keys (image-spec annotations.md).
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelRefName  = "org.opencontainers.image.ref.name"
)

// Platform is one os/arch of the index.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Spec is one image index.
type Spec struct {
	Title string // e.g. probeshim-cluster
	// Binary is the program's path in the image, e.g. /bin/probeshim-cluster; it is the entrypoint.
	Binary string
	// Binaries maps each platform to the host file built for it.
	Binaries map[Platform]string
	Version  string // the version label
	Revision string // the git commit
	Source   string // the repository URL
	Created  time.Time
	// Labels are added to the image config and, with the above, to the index's annotations.
	Labels map[string]string
}

// labels are the OCI labels of every image of spec and of its index.
func (s Spec) labels() map[string]string {
	l := map[string]string{
		LabelTitle:    s.Title,
		LabelVersion:  s.Version,
		LabelRevision: s.Revision,
		LabelSource:   s.Source,
		LabelCreated:  s.Created.UTC().Format(time.RFC3339),
	}
	for k, v := range s.Labels {
		l[k] = v
	}
	for k, v := range l {
		if v == "" {
			delete(l, k)
		}
	}
	return l
}

// Build returns the image index of spec: one image per platform, in os/arch order.
func Build(spec Spec) (v1.ImageIndex, error) {
	if spec.Binary == "" || !filepath.IsAbs(spec.Binary) {
		return nil, fmt.Errorf("image %s: the binary's path %q must be absolute", spec.Title, spec.Binary)
	}
	if len(spec.Binaries) == 0 {
		return nil, fmt.Errorf("image %s: no platform", spec.Title)
	}
	platforms := make([]Platform, 0, len(spec.Binaries))
	for p := range spec.Binaries {
		platforms = append(platforms, p)
	}
	sort.Slice(platforms, func(i, j int) bool { return platforms[i].String() < platforms[j].String() })
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := buildImage(spec, p)
		if err != nil {
			return nil, fmt.Errorf("image %s for %s: %w", spec.Title, p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch},
		}})
	}
	out, ok := mutate.Annotations(idx, spec.labels()).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index did not give an index")
	}
	return out, nil
}

func buildImage(spec Spec, p Platform) (v1.Image, error) {
	bin, err := os.ReadFile(spec.Binaries[p])
	if err != nil {
		return nil, err
	}
	layerTar, err := rootfs(spec.Binary, bin, spec.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: spec.Created.UTC()}
	user := strconv.Itoa(NonRoot) + ":" + strconv.Itoa(NonRoot)
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: p.Arch,
		OS:           p.OS,
		Created:      created,
		Config: v1.Config{
			Entrypoint: []string{spec.Binary},
			User:       user,
			WorkingDir: "/",
			Env:        []string{"PATH=/bin"},
			Labels:     spec.labels(),
		},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "probeshim ociimage: " + spec.Binary + " for " + p.String()},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

// rootfs is the image's only layer: the binary (root-owned, 0755), /etc/passwd and /etc/group
// naming root and nonroot (so tools that print user names work), a home for nonroot and /tmp.
func rootfs(binary string, bin []byte, mtime time.Time) ([]byte, error) {
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte
		dir      bool
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot)
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: NonRoot, gid: NonRoot, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	// The binary and its parent folders.
	rel := binary[1:]
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		entries = append(entries, entry{name: d + "/", mode: 0o755, dir: true})
	}
	entries = append(entries, entry{name: rel, mode: 0o755, data: bin})
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e.name] {
			continue
		}
		seen[e.name] = true
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime.UTC(), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes idx as an OCI image layout at dir (replacing what was there), its index.json
// naming it tag (org.opencontainers.image.ref.name).
func WriteLayout(dir string, idx v1.ImageIndex, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{LabelRefName: tag}))
}

// TarLayout writes the OCI layout at dir as one tar (the form `ctr images import` and
// `skopeo copy oci-archive:` read), with the files in name order, owned by root and dated mtime.
func TarLayout(w io.Writer, dir string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, p := range names {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: mtime.UTC(), Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}
