// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

func TestWriteDockerArchive(t *testing.T) {
	spec := Spec{
		Ref:        "probeshim.local/x:test",
		Entries:    append(BaseEntries(), Entry{Path: "/bin/hello", Data: []byte("#!/bin/sh\n")}, Entry{Path: "/usr/bin/sh", Link: "/bin/busybox"}),
		Entrypoint: []string{"/bin/hello"},
	}
	var a, b bytes.Buffer
	if err := Write(&a, spec); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, spec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two writes of one spec differ: the tar must be reproducible")
	}
	files := readTar(t, a.Bytes())
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || manifest[0].RepoTags[0] != spec.Ref || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest = %+v", manifest)
	}
	if _, ok := files[manifest[0].Config]; !ok {
		t.Fatalf("config %s missing", manifest[0].Config)
	}
	layer := readTarHeaders(t, files[manifest[0].Layers[0]])
	for name, want := range map[string]byte{"bin/": tar.TypeDir, "bin/hello": tar.TypeReg, "usr/": tar.TypeDir, "usr/bin/": tar.TypeDir, "usr/bin/sh": tar.TypeSymlink, "tmp/": tar.TypeDir} {
		h, ok := layer[name]
		if !ok || h.Typeflag != want {
			t.Errorf("layer entry %s: got %+v, want type %c", name, h, want)
		}
	}
	if layer["tmp/"].Mode != 0o1777 {
		t.Errorf("/tmp mode = %o, want 1777", layer["tmp/"].Mode)
	}
}

func readTar(t *testing.T, b []byte) map[string][]byte {
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		out[h.Name] = data
	}
}

func readTarHeaders(t *testing.T, b []byte) map[string]*tar.Header {
	out := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}
