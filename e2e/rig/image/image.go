// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package image writes single-layer container images as docker-archive tars
// (the format of `docker save`), which `ctr images import` reads. It exists
// because the test machines reach no registry: every image the rig runs is
// packed here from files on the host.
package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Entry is one file system object of the image's only layer. Exactly one of
// Source, Data and Link is used for a regular file or symlink; Dir makes a
// directory.
type Entry struct {
	Path   string      // absolute path inside the image, e.g. /bin/sh
	Mode   fs.FileMode // permission bits; 0 means 0755 for files and dirs
	Source string      // host file to copy
	Data   []byte      // literal content
	Link   string      // symlink target
	Dir    bool
}

// Spec is a whole image: a reference, its files and the runtime config.
type Spec struct {
	Ref        string // e.g. probeshim.local/testbox:e2e
	Entries    []Entry
	Entrypoint []string
	Cmd        []string
	Env        []string // defaults to a PATH covering /bin, /usr/bin, /sbin, /usr/sbin
	WorkingDir string
	User       string
}

// epoch is every entry's mtime, so that equal inputs give byte-identical tars.
var epoch = time.Unix(0, 0).UTC()

// Write writes spec as a docker-archive tar to w.
func Write(w io.Writer, spec Spec) error {
	if spec.Ref == "" || !strings.Contains(spec.Ref, ":") {
		return fmt.Errorf("image ref %q needs a name and a tag", spec.Ref)
	}
	layer, err := buildLayer(spec.Entries)
	if err != nil {
		return fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	layerSum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(layerSum[:])
	env := spec.Env
	if env == nil {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Env":        env,
			"Entrypoint": spec.Entrypoint,
			"Cmd":        spec.Cmd,
			"WorkingDir": spec.WorkingDir,
			"User":       spec.User,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "probeshim e2e image builder"}},
	})
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   cfgName,
		"RepoTags": []string{spec.Ref},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{{cfgName, cfg}, {path.Dir(layerName) + "/", nil}, {layerName, layer}, {"manifest.json", manifest}} {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteFile writes spec to a file at p.
func WriteFile(p string, spec Spec) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	if err := Write(f, spec); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// buildLayer returns the layer tar: every parent directory is created, entries
// are sorted by path, and a later entry for a path replaces an earlier one.
func buildLayer(entries []Entry) ([]byte, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		p := path.Clean("/" + e.Path)
		if p == "/" {
			continue
		}
		e.Path = p
		byPath[p] = e
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Entry{Path: d, Dir: true}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		mode := int64(e.Mode.Perm())
		if e.Mode&fs.ModeSticky != 0 {
			mode |= 0o1000
		}
		if mode == 0 {
			mode = 0o755
		}
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: mode, ModTime: epoch, Format: tar.FormatPAX}
		var data []byte
		switch {
		case e.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.Link, 0o777
		case e.Source != "":
			b, err := os.ReadFile(e.Source)
			if err != nil {
				return nil, err
			}
			data = b
		default:
			data = e.Data
		}
		if h.Typeflag == 0 {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// BaseEntries are what most images want besides their programs: /tmp with
// the sticky bit, the mount points runc expects, and /etc/passwd and
// /etc/group with root and nobody so that numeric and named users resolve.
func BaseEntries() []Entry {
	return []Entry{
		{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky},
		{Path: "/proc", Dir: true}, {Path: "/sys", Dir: true}, {Path: "/dev", Dir: true},
		{Path: "/etc", Dir: true}, {Path: "/root", Dir: true, Mode: 0o700}, {Path: "/var", Dir: true},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		// The kubelet and runc bind mount these; an empty file is enough.
		{Path: "/etc/hosts", Mode: 0o644}, {Path: "/etc/hostname", Mode: 0o644}, {Path: "/etc/resolv.conf", Mode: 0o644},
	}
}

// BusyboxEntries installs a static busybox at /bin/busybox with a symlink for
// every applet it reports (`busybox --list-full`), so that sh, wget, httpd,
// nc and friends are on PATH.
func BusyboxEntries(busybox string, applets []string) []Entry {
	out := []Entry{{Path: "/bin/busybox", Source: busybox}}
	for _, a := range applets {
		a = "/" + strings.TrimPrefix(strings.TrimSpace(a), "/")
		if a == "/" || a == "/bin/busybox" {
			continue
		}
		out = append(out, Entry{Path: a, Link: "/bin/busybox"})
	}
	return out
}
