// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"  // apt's Release still lists MD5Sum; SHA256 is what apt checks
	"crypto/sha1" // the Packages stanza's SHA1 field, as Debian's archive writes it
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The apt repository: one suite, one component, as static files (a "flat" layout would do for one
// package, but suite and component let a later minor version get a suite of its own, the way
// Kubernetes' package repositories split by minor version).
const (
	aptSuite     = "stable"
	aptComponent = "main"
)

// aptPackage is one .deb of the repository.
type aptPackage struct {
	control  []field
	filename string // its path from the repository's root, e.g. pool/main/p/probeshim/<file>.deb
	data     []byte
}

// stanza is the package's paragraph of a Packages file: the control fields as the package has
// them, plus where it is and its checksums (what apt-ftparchive and dak write); Description,
// which may run over several lines, stays last.
func (p aptPackage) stanza() string {
	var b strings.Builder
	for _, f := range p.control {
		if !strings.EqualFold(f.name, "Description") {
			fmt.Fprintf(&b, "%s: %s\n", f.name, f.value)
		}
	}
	md5sum := md5.Sum(p.data)
	sha1sum := sha1.Sum(p.data)
	sha256sum := sha256.Sum256(p.data)
	fmt.Fprintf(&b, "Filename: %s\nSize: %d\nMD5sum: %x\nSHA1: %x\nSHA256: %x\n",
		p.filename, len(p.data), md5sum, sha1sum, sha256sum)
	if d := get(p.control, "Description"); d != "" {
		fmt.Fprintf(&b, "Description: %s\n", d)
	}
	return b.String()
}

// aptRepo writes the repository at dir from the .deb files debs: the pool, each architecture's
// Packages and Packages.gz, the Release file listing their checksums, and Release signed two ways
// (Release.gpg detached, InRelease inline; apt reads InRelease first).
func aptRepo(dir string, debs []string, s *signer, date time.Time, version string) error {
	byArch := map[string][]aptPackage{}
	for _, deb := range debs {
		data, err := os.ReadFile(deb)
		if err != nil {
			return err
		}
		ctl, err := debFiles(data, "control.tar", "control")
		if err != nil {
			return fmt.Errorf("%s: %w", deb, err)
		}
		fields, err := parseControl(ctl["control"])
		if err != nil {
			return fmt.Errorf("%s: %w", deb, err)
		}
		name, arch := get(fields, "Package"), get(fields, "Architecture")
		if name == "" || arch == "" || get(fields, "Version") == "" {
			return fmt.Errorf("%s: control lacks Package, Version or Architecture", deb)
		}
		// Debian's pool layout: pool/<component>/<first letter>/<source package>/.
		rel := path.Join("pool", aptComponent, name[:1], name, filepath.Base(deb))
		if err := writeFile(filepath.Join(dir, filepath.FromSlash(rel)), data); err != nil {
			return err
		}
		byArch[arch] = append(byArch[arch], aptPackage{control: fields, filename: rel, data: data})
	}
	if len(byArch) == 0 {
		return fmt.Errorf("no .deb for the apt repository")
	}
	arches := make([]string, 0, len(byArch))
	for a := range byArch {
		arches = append(arches, a)
	}
	sort.Strings(arches)

	// indexes: path under dists/<suite>/ -> contents, what Release lists.
	indexes := map[string][]byte{}
	for _, arch := range arches {
		pkgs := byArch[arch]
		sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].filename < pkgs[j].filename })
		stanzas := make([]string, len(pkgs))
		for i, p := range pkgs {
			stanzas[i] = p.stanza()
		}
		packages := []byte(strings.Join(stanzas, "\n"))
		gz, err := gzipBytes(packages)
		if err != nil {
			return err
		}
		base := path.Join(aptComponent, "binary-"+arch)
		indexes[base+"/Packages"] = packages
		indexes[base+"/Packages.gz"] = gz
	}
	suite := filepath.Join(dir, "dists", aptSuite)
	for name, data := range indexes {
		if err := writeFile(filepath.Join(suite, filepath.FromSlash(name)), data); err != nil {
			return err
		}
	}
	release := releaseFile(indexes, arches, date, version)
	if err := writeFile(filepath.Join(suite, "Release"), release); err != nil {
		return err
	}
	var sig bytes.Buffer
	if err := s.detach(&sig, bytes.NewReader(release)); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(suite, "Release.gpg"), sig.Bytes()); err != nil {
		return err
	}
	inRelease, err := s.clearsign(release)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(suite, "InRelease"), inRelease)
}

// releaseFile is the suite's Release file (Debian's repository format): what the suite holds and
// every index's size and checksums, which apt checks each downloaded index against. Date is the
// commit's, so the file (and, with a fixed key, its signatures) is the same on every run.
func releaseFile(indexes map[string][]byte, arches []string, date time.Time, version string) []byte {
	names := make([]string, 0, len(indexes))
	for n := range indexes {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "Origin: probeshim\nLabel: probeshim\nSuite: %s\nCodename: %s\nVersion: %s\n",
		aptSuite, aptSuite, version)
	fmt.Fprintf(&b, "Date: %s\n", date.UTC().Format("Mon, 02 Jan 2006 15:04:05 UTC"))
	fmt.Fprintf(&b, "Architectures: %s\nComponents: %s\n", strings.Join(arches, " "), aptComponent)
	b.WriteString("Description: probeshim node service packages\n")
	for _, sum := range []struct {
		field string
		hash  func([]byte) []byte
	}{
		{"MD5Sum", func(d []byte) []byte { s := md5.Sum(d); return s[:] }},
		{"SHA256", func(d []byte) []byte { s := sha256.Sum256(d); return s[:] }},
	} {
		b.WriteString(sum.field + ":\n")
		for _, n := range names {
			fmt.Fprintf(&b, " %s %8d %s\n", hex.EncodeToString(sum.hash(indexes[n])), len(indexes[n]), n)
		}
	}
	return []byte(b.String())
}

// gzipBytes compresses data with a gzip header that names no file and no time.
func gzipBytes(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}
