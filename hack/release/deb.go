// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// A .deb is an ar archive of debian-binary, control.tar.* and data.tar.* (deb(5)). Reading the two
// files release needs from it takes a few lines; pault.ag/go/debian would do it too, but it requires
// newer golang.org/x/sys, x/crypto and klauspost/compress than the project pins, moving every binary's
// dependencies for a release tool.

// arMember returns the data of the first member of the ar archive whose name starts with prefix.
func arMember(archive []byte, prefix string) (name string, data []byte, err error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(archive, []byte(magic)) {
		return "", nil, errors.New("not an ar archive")
	}
	rest := archive[len(magic):]
	for len(rest) >= 60 {
		hdr := rest[:60]
		if string(hdr[58:60]) != "`\n" {
			return "", nil, errors.New("corrupt ar member header")
		}
		name := strings.TrimSuffix(strings.TrimSpace(string(hdr[0:16])), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || size < 0 || size > int64(len(rest)-60) {
			return "", nil, fmt.Errorf("ar member %q: bad size", name)
		}
		body := rest[60 : 60+size]
		if strings.HasPrefix(name, prefix) {
			return name, body, nil
		}
		rest = rest[60+size:]
		if size%2 == 1 && len(rest) > 0 { // members start on even offsets
			rest = rest[1:]
		}
	}
	return "", nil, fmt.Errorf("no ar member %s*", prefix)
}

// debFiles returns the regular files named names (e.g. "control", "usr/bin/probeshim") from the
// .deb's control.tar.* or data.tar.* member (which: "control.tar" or "data.tar"), in one pass.
func debFiles(deb []byte, which string, names ...string) (map[string][]byte, error) {
	member, data, err := arMember(deb, which)
	if err != nil {
		return nil, err
	}
	var r io.Reader
	switch path.Ext(member) {
	case ".gz":
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", member, err)
		}
		r = zr
	case ".tar":
		r = bytes.NewReader(data)
	default:
		// nfpm writes gzip unless nfpm.yaml sets deb.compression.
		return nil, fmt.Errorf("%s: compression not read here (only gzip or none)", member)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for len(files) < len(want) {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", member, err)
		}
		if n := path.Clean(strings.TrimPrefix(h.Name, "./")); want[n] && h.Typeflag == tar.TypeReg {
			if files[n], err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %w", member, err)
			}
		}
	}
	for _, n := range names {
		if _, ok := files[n]; !ok {
			return nil, fmt.Errorf("%s: no %s", member, n)
		}
	}
	return files, nil
}

// field is one field of a Debian control paragraph; value keeps its continuation lines as written
// ("first line\n second line").
type field struct{ name, value string }

// parseControl reads one control paragraph (deb-control(5)), keeping the fields' order.
func parseControl(data []byte) ([]field, error) {
	var fields []field
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case line == "":
			return nil, errors.New("control: more than one paragraph")
		case line[0] == ' ' || line[0] == '\t':
			if len(fields) == 0 {
				return nil, errors.New("control: continuation line before any field")
			}
			fields[len(fields)-1].value += "\n" + line
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("control: not a field: %q", line)
			}
			fields = append(fields, field{name: name, value: strings.TrimSpace(value)})
		}
	}
	return fields, nil
}

// get returns the value of the field named name (case-insensitive, as in deb-control(5)).
func get(fields []field, name string) string {
	for _, f := range fields {
		if strings.EqualFold(f.name, name) {
			return f.value
		}
	}
	return ""
}
