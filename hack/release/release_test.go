// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"golang.org/x/mod/semver"
	"sigs.k8s.io/yaml"

	"github.com/probeshim/probeshim/internal/build/ociimage"
	"github.com/probeshim/probeshim/internal/testkit/testpki"
)

// epoch stands for the commit's time: in the past, as a commit's is (verifying a signature made
// after now fails).
var epoch = time.Date(2025, 6, 1, 12, 0, 2, 0, time.UTC)

func TestTarGzReproducible(t *testing.T) {
	dir := t.TempDir()
	var files []tarFile
	for i, name := range []string{"probeshim", "README.md", "LICENSE"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("contents of "+name), 0o600); err != nil {
			t.Fatal(err)
		}
		// Different times and modes on disk must not show.
		if err := os.Chtimes(p, time.Now(), time.Now().Add(time.Duration(-i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		files = append(files, tarFile{name: name, mode: 0o644, src: p})
	}
	var a, b bytes.Buffer
	if err := writeTarGz(&a, files, epoch); err != nil {
		t.Fatal(err)
	}
	reversed := []tarFile{files[2], files[1], files[0]}
	if err := os.Chtimes(files[0].src, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := writeTarGz(&b, reversed, epoch); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two archives of the same files differ")
	}
	zr, err := gzip.NewReader(&a)
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header names %q dated %v, want neither", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: owner %d:%d (%q:%q), mtime %v; want 0:0, no names, %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, epoch)
		}
	}
	if got := strings.Join(names, " "); got != "LICENSE README.md probeshim" {
		t.Errorf("entries %s, want them in name order", got)
	}
}

func TestSignaturesReproducible(t *testing.T) {
	keyFile := writeTestKey(t, epoch.Add(-time.Hour))
	data := []byte("Origin: probeshim\n")
	var sigs [2][]byte
	for i := range sigs {
		s, err := newSigner(keyFile, "", epoch)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := s.detach(&buf, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		sigs[i] = buf.Bytes()
		pub, err := s.publicKey()
		if err != nil {
			t.Fatal(err)
		}
		sig := verifyDetached(t, pub, data, sigs[i])
		if !sig.CreationTime.Equal(epoch) {
			t.Errorf("signature dated %v, want the commit's time %v", sig.CreationTime, epoch)
		}
	}
	if !bytes.Equal(sigs[0], sigs[1]) {
		t.Errorf("two signatures of the same bytes with the same key differ:\n%s\n%s", sigs[0], sigs[1])
	}
}

// A key made after the commit cannot sign at the commit's time: its signatures are dated its own
// creation, a time as fixed as the key.
func TestSignatureOfANewerKey(t *testing.T) {
	created := epoch.Add(24 * time.Hour)
	s, err := newSigner(writeTestKey(t, created), "", epoch)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.detach(&buf, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	pub, err := s.publicKey()
	if err != nil {
		t.Fatal(err)
	}
	if sig := verifyDetached(t, pub, []byte("x"), buf.Bytes()); !sig.CreationTime.Equal(created) {
		t.Errorf("signature dated %v, want the key's creation %v", sig.CreationTime, created)
	}
}

func TestDryRunKey(t *testing.T) {
	s, err := newSigner("", "", epoch)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.publicKey()
	if err != nil {
		t.Fatal(err)
	}
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(pub))
	if err != nil {
		t.Fatal(err)
	}
	if len(ring) != 1 || ring[0].PrivateKey != nil {
		t.Fatalf("public key file: %d keys, private part %v", len(ring), ring[0].PrivateKey != nil)
	}
	for id := range ring[0].Identities {
		if !strings.Contains(id, "DRY RUN") {
			t.Errorf("user ID %q does not say it is a dry run's", id)
		}
	}
	if !s.ephemeral {
		t.Error("a signer without key file is not marked ephemeral")
	}
}

func TestControlAndDebFiles(t *testing.T) {
	deb := fakeDeb(t, "arm64")
	ctl, err := debFiles(deb, "control.tar", "control")
	if err != nil {
		t.Fatal(err)
	}
	fields, err := parseControl(ctl["control"])
	if err != nil {
		t.Fatal(err)
	}
	if get(fields, "architecture") != "arm64" || get(fields, "Package") != "probeshim" {
		t.Errorf("fields %v", fields)
	}
	if d := get(fields, "Description"); !strings.HasPrefix(d, "node service\n second line") {
		t.Errorf("Description %q lost its continuation line", d)
	}
	data, err := debFiles(deb, "data.tar", "usr/bin/probeshim")
	if err != nil {
		t.Fatal(err)
	}
	if string(data["usr/bin/probeshim"]) != "binary for arm64" {
		t.Errorf("usr/bin/probeshim: %q", data["usr/bin/probeshim"])
	}
	if _, err := debFiles(deb, "data.tar", "usr/bin/missing"); err == nil {
		t.Error("no error for a missing file")
	}
}

// TestAptRepo builds the apt repository of two small packages and checks it as apt would: the
// Release file's checksums match the indexes, the Packages stanzas have the fields apt reads and the
// packages' checksums, InRelease and Release.gpg verify with the public key.
func TestAptRepo(t *testing.T) {
	dir := t.TempDir()
	var debs []string
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, "probeshim_1.2.3-1_"+arch+".deb")
		if err := os.WriteFile(p, fakeDeb(t, arch), 0o644); err != nil {
			t.Fatal(err)
		}
		debs = append(debs, p)
	}
	s, err := newSigner("", "", epoch)
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(dir, "repo")
	if err := aptRepo(repo, debs, s, epoch, "1.2.3"); err != nil {
		t.Fatal(err)
	}
	pub, err := s.publicKey()
	if err != nil {
		t.Fatal(err)
	}
	checkAptRepo(t, repo, pub, map[string]string{"amd64": debs[0], "arm64": debs[1]})
	aptGet(t, repo, pub, map[string]string{"amd64": debs[0], "arm64": debs[1]})
}

func TestMergeSBOM(t *testing.T) {
	app := func(arch, pkg string) *cdx.BOM {
		mainRef := "pkg:golang/example.com/m@v1.0.0?type=module#" + pkg
		lib := "pkg:golang/example.com/lib@v1.0.0?type=module"
		qual := "?goarch=" + arch + "&goos=linux&type=module"
		return &cdx.BOM{
			Metadata: &cdx.Metadata{Component: &cdx.Component{BOMRef: mainRef, Type: cdx.ComponentTypeApplication,
				Name: "example.com/m", PackageURL: "pkg:golang/example.com/m@v1.0.0" + qual + "#" + pkg}},
			Components:   &[]cdx.Component{{BOMRef: lib, Name: "example.com/lib", PackageURL: "pkg:golang/example.com/lib@v1.0.0" + qual}},
			Dependencies: &[]cdx.Dependency{{Ref: mainRef, Dependencies: &[]string{lib}}, {Ref: lib}},
		}
	}
	b := mergeSBOM("img.oci.tar", cdx.ComponentTypeContainer, "1.2.3", []byte("image"),
		[]*cdx.BOM{app("amd64", "cmd/a"), app("arm64", "cmd/a"), app("amd64", "cmd/b")}, epoch)
	top := b.Metadata.Component
	if top.Name != "img.oci.tar" || top.Version != "1.2.3" || top.Type != cdx.ComponentTypeContainer {
		t.Errorf("main component %+v", top)
	}
	if sum := sha256.Sum256([]byte("image")); (*top.Hashes)[0].Value != hex.EncodeToString(sum[:]) {
		t.Errorf("artifact hash %v", *top.Hashes)
	}
	if b.Metadata.Timestamp != "2025-06-01T12:00:02Z" {
		t.Errorf("timestamp %q, want the commit's", b.Metadata.Timestamp)
	}
	if len(*top.Components) != 3 {
		t.Errorf("%d binaries, want 3 (a for two architectures, b)", len(*top.Components))
	}
	// The library of two architectures: two components, one per purl; the same one of two binaries: one.
	if len(*b.Components) != 2 {
		t.Errorf("%d modules, want 2: %+v", len(*b.Components), *b.Components)
	}
	deps := map[string][]string{}
	for _, d := range *b.Dependencies {
		deps[d.Ref] = *d.Dependencies
	}
	amd64Main := "pkg:golang/example.com/m@v1.0.0?goarch=amd64&goos=linux&type=module#cmd/a"
	if got := deps[amd64Main]; len(got) != 1 || got[0] != "pkg:golang/example.com/lib@v1.0.0?goarch=amd64&goos=linux&type=module" {
		t.Errorf("%s depends on %v", amd64Main, got)
	}
	if got := deps[top.BOMRef]; len(got) != 3 {
		t.Errorf("the artifact depends on %v, want its 3 binaries", got)
	}
}

func TestSHA256SUMS(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"a.tar.gz": "a", "a.tar.gz.asc": "sig", "b.deb": "b"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	sums, err := sha256sums(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(sums), "\n"); n != 2 || strings.Contains(string(sums), ".asc") {
		t.Errorf("SHA256SUMS:\n%s\nwant a.tar.gz and b.deb only", sums)
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	sha256sumCheck(t, dir)
}

// TestReleaseTwice runs the whole dry run twice, with one key, into two folders and compares them:
// every file the same (the artifacts, SHA256SUMS, the repositories and, with one key, even the
// signatures). It then checks the release as its users would: sha256sum -c, every signature, apt
// reading the apt repository, the dnf repository's checksums, the archives' binaries being the
// packages'. It builds everything (a few minutes on 2 cores): -short skips it.
func TestReleaseTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the whole dry run, twice, takes minutes")
	}
	if os.Getenv("PROBESHIM_UNIT_ONLY") != "" {
		t.Skip("PROBESHIM_UNIT_ONLY (make unit): the whole dry run builds every artifact twice, minutes; make package-test runs it")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	trackCheckout(t, root)
	// release exports them for the tools it runs; restore them after.
	t.Setenv("SOURCE_DATE_EPOCH", os.Getenv("SOURCE_DATE_EPOCH"))
	t.Setenv("PROBESHIM_VERSION", os.Getenv("PROBESHIM_VERSION"))
	signingKey := writeTestKey(t, time.Unix(0, 0))
	outs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	for _, out := range outs {
		o := options{root: root, out: out, keyFile: signingKey, repoURL: defaultRepoURL, report: io.Discard}
		start := time.Now()
		if err := release(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Logf("dry run into %s: %s", out, time.Since(start).Round(time.Second))
	}
	a, b := treeSums(t, outs[0]), treeSums(t, outs[1])
	if a["SHA256SUMS"] == "" || a["SHA256SUMS"] != b["SHA256SUMS"] {
		t.Errorf("SHA256SUMS differ between the two runs")
	}
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("%s differs between the two runs", name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			t.Errorf("%s only in the second run", name)
		}
	}
	if t.Failed() {
		return
	}

	out := outs[0]
	sha256sumCheck(t, out)
	pub, err := os.ReadFile(filepath.Join(out, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	var archives, pluginArchives, debs, rpms []string
	for name := range a {
		switch {
		case strings.Contains(name, "/"):
		case strings.HasPrefix(name, kubectlPlugin.name+"_") && !strings.HasSuffix(name, ".asc") && !strings.HasSuffix(name, ".cdx.json"):
			pluginArchives = append(pluginArchives, name)
		case strings.HasSuffix(name, ".tar.gz"):
			archives = append(archives, name)
		case strings.HasSuffix(name, ".deb"):
			debs = append(debs, name)
		case strings.HasSuffix(name, ".rpm"):
			rpms = append(rpms, name)
		}
	}
	if len(archives) != 2 || len(debs) != 2 || len(rpms) != 2 || len(pluginArchives) != len(pluginPlatforms) {
		t.Fatalf("archives %v, debs %v, rpms %v: want two of each; plugin archives %v, want %d", archives, debs, rpms, pluginArchives, len(pluginPlatforms))
	}
	// Signed: SHA256SUMS, every archive, package and the image.
	signed := 0
	for name := range a {
		if !strings.HasSuffix(name, ".asc") || strings.Contains(name, "/") || name == keyFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(out, strings.TrimSuffix(name, ".asc")))
		if err != nil {
			t.Fatal(err)
		}
		sig, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		verifyDetached(t, pub, data, sig)
		signed++
	}
	if signed != 1+len(archives)+len(debs)+len(rpms)+len(pluginArchives)+1+1 {
		t.Errorf("%d signatures, want SHA256SUMS, 2 archives, 4 packages, %d plugin archives, the image's and the chart's", signed, len(pluginArchives))
	}
	checkKrewManifest(t, out, a)
	// The archives hold the packages' very binaries.
	for _, arch := range arches {
		archive := findArch(archives, "_linux_"+arch+".tar.gz")
		packaged := checkPackagesOf(t, arch, filepath.Join(out, findArch(debs, "_"+arch+".deb")),
			filepath.Join(out, findArch(rpms, "."+rpmArches[arch]+".rpm")))
		f, err := os.Open(filepath.Join(out, archive))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		inArchive, found, err := tarEntry(zr, node.name)
		f.Close()
		if err != nil || !found || !bytes.Equal(inArchive, packaged) {
			t.Errorf("%s: its probeshim is not the .deb's (found %v, %v)", archive, found, err)
		}
	}
	// SBOMs: one per archive, package and the image, each naming its artifact's checksum.
	for name := range a {
		if !strings.HasSuffix(name, ".cdx.json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		var bom cdx.BOM
		if err := cdx.NewBOMDecoder(bytes.NewReader(data), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		artifact := strings.TrimSuffix(name, ".cdx.json")
		if h := bom.Metadata.Component.Hashes; h == nil || (*h)[0].Value != a[artifact] {
			t.Errorf("%s: the SBOM's hash is not %s's", name, artifact)
		}
		if bom.Components == nil || len(*bom.Components) < 10 {
			t.Errorf("%s: too few modules for a probeshim binary", name)
		}
	}
	debByArch := map[string]string{}
	for _, arch := range arches {
		debByArch[arch] = filepath.Join(out, findArch(debs, "_"+arch+".deb"))
	}
	checkAptRepo(t, filepath.Join(out, "repo", "apt"), pub, debByArch)
	aptGet(t, filepath.Join(out, "repo", "apt"), pub, debByArch)
	checkRPMRepo(t, filepath.Join(out, "repo", "rpm"), pub, len(rpms))
	rpmByArch := map[string]string{}
	for _, arch := range arches {
		rpmByArch[rpmArches[arch]] = filepath.Join(out, findArch(rpms, "."+rpmArches[arch]+".rpm"))
	}
	dnfGet(t, filepath.Join(out, "repo", "rpm"), rpmByArch)
}

// checkPackagesOf checks the .deb and the .rpm built for arch: each declares it, and both hold one
// static probeshim for that machine, which it returns.
func checkPackagesOf(t *testing.T, arch, deb, rpm string) []byte {
	t.Helper()
	data, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	control, err := debFiles(data, "control.tar", "control")
	if err != nil {
		t.Fatalf("%s: %v", deb, err)
	}
	fields, err := parseControl(control["control"])
	if err != nil {
		t.Fatalf("%s: control: %v", deb, err)
	}
	if got := get(fields, "Architecture"); got != arch {
		t.Errorf("%s: Architecture %q, want %q", deb, got, arch)
	}
	packaged, err := debFiles(data, "data.tar", debPaths[node.name])
	if err != nil {
		t.Fatalf("%s: %v", deb, err)
	}
	bin := packaged[debPaths[node.name]]
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: %s: %v", deb, debPaths[node.name], err)
	}
	if want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]; f.Machine != want {
		t.Errorf("%s: %s is for %s, want %s", deb, debPaths[node.name], f.Machine, want)
	}
	if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		t.Errorf("%s: %s is dynamically linked (it has an interpreter)", deb, debPaths[node.name])
	}

	query := exec.Command("rpm", "-qp", "--qf", "%{ARCH}\n[%{FILENAMES} %{FILEDIGESTS}\n]", rpm)
	got, err := query.Output()
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if lines[0] != rpmArches[arch] {
		t.Errorf("%s: ARCH %q, want %q", rpm, lines[0], rpmArches[arch])
	}
	sum := sha256.Sum256(bin)
	if want := "/" + debPaths[node.name] + " " + hex.EncodeToString(sum[:]); !slices.Contains(lines[1:], want) {
		t.Errorf("%s: its probeshim is not the .deb's (want %q in %q)", rpm, want, lines[1:])
	}
	return bin
}

// checkAptRepo checks the apt repository at dir holds debs (arch -> file), signed by pub.
func checkAptRepo(t *testing.T, dir string, pub []byte, debs map[string]string) {
	t.Helper()
	suite := filepath.Join(dir, "dists", aptSuite)
	release, err := os.ReadFile(filepath.Join(suite, "Release"))
	if err != nil {
		t.Fatal(err)
	}
	fields, err := parseControl(release)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	for _, f := range []string{"Suite", "Codename", "Architectures", "Components"} {
		if get(fields, f) == "" {
			t.Errorf("Release has no %s", f)
		}
	}
	if _, err := time.Parse("Mon, 02 Jan 2006 15:04:05 UTC", get(fields, "Date")); err != nil {
		t.Errorf("Release Date: %v", err)
	}
	// Every index the Release file lists has its size and checksum, and every index is listed.
	listed := map[string]bool{}
	for _, f := range []string{"MD5Sum", "SHA256"} {
		for _, line := range strings.Split(strings.TrimSpace(get(fields, f)), "\n") {
			parts := strings.Fields(line)
			if len(parts) != 3 {
				t.Errorf("%s line %q", f, line)
				continue
			}
			data, err := os.ReadFile(filepath.Join(suite, parts[2]))
			if err != nil {
				t.Errorf("%s lists %s: %v", f, parts[2], err)
				continue
			}
			var sum string
			if f == "SHA256" {
				s := sha256.Sum256(data)
				sum = hex.EncodeToString(s[:])
			} else {
				sum = md5Hex(data)
			}
			if parts[0] != sum || parts[1] != strconv.Itoa(len(data)) {
				t.Errorf("%s of %s: listed %s %s, is %s %d", f, parts[2], parts[0], parts[1], sum, len(data))
			}
			listed[parts[2]] = true
		}
	}
	for arch, deb := range debs {
		for _, idx := range []string{"Packages", "Packages.gz"} {
			if rel := "main/binary-" + arch + "/" + idx; !listed[rel] {
				t.Errorf("Release does not list %s", rel)
			}
		}
		packages, err := os.ReadFile(filepath.Join(suite, "main", "binary-"+arch, "Packages"))
		if err != nil {
			t.Fatal(err)
		}
		stanza, err := parseControl(bytes.TrimSpace(packages)) // one package per architecture here
		if err != nil {
			t.Fatalf("Packages of %s: %v", arch, err)
		}
		for _, f := range []string{"Package", "Version", "Architecture", "Maintainer", "Filename", "Size", "MD5sum", "SHA256", "Description"} {
			if get(stanza, f) == "" {
				t.Errorf("the %s stanza has no %s", arch, f)
			}
		}
		data, err := os.ReadFile(deb)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := os.ReadFile(filepath.Join(dir, get(stanza, "Filename")))
		if err != nil {
			t.Fatalf("Filename: %v", err)
		}
		sum := sha256.Sum256(data)
		if !bytes.Equal(pool, data) || get(stanza, "SHA256") != hex.EncodeToString(sum[:]) || get(stanza, "Size") != strconv.Itoa(len(data)) {
			t.Errorf("%s: the pool's file or the stanza's SHA256/Size is not the package's", arch)
		}
	}
	// Release.gpg is Release's detached signature; InRelease is Release, signed inline.
	sig, err := os.ReadFile(filepath.Join(suite, "Release.gpg"))
	if err != nil {
		t.Fatal(err)
	}
	verifyDetached(t, pub, release, sig)
	inRelease, err := os.ReadFile(filepath.Join(suite, "InRelease"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := clearsign.Decode(inRelease)
	if block == nil {
		t.Fatal("InRelease is not cleartext-signed")
	}
	if !bytes.Equal(bytes.TrimRight(block.Plaintext, "\n"), bytes.TrimRight(release, "\n")) {
		t.Errorf("InRelease's text is not Release:\n%s", block.Plaintext)
	}
	ring := keyRing(t, pub)
	if _, err := block.VerifySignature(ring, nil); err != nil {
		t.Errorf("InRelease: %v", err)
	}
	gpgv(t, pub, filepath.Join(suite, "InRelease"))
	gpgv(t, pub, filepath.Join(suite, "Release.gpg"), filepath.Join(suite, "Release"))
}

// aptGet points apt-get at the repository in a scratch apt root (nothing of the machine's apt
// state is read or written): update must verify InRelease with the key as signed-by, and download
// must fetch each package with the checksum Packages gives.
func aptGet(t *testing.T, dir string, pub []byte, debs map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Log("apt-get missing: the repository is not tried with apt")
		return
	}
	root := t.TempDir()
	for _, d := range []string{"etc/apt/apt.conf.d", "etc/apt/preferences.d", "etc/apt/sources.list.d", "etc/apt/trusted.gpg.d",
		"var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg", "download"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key := filepath.Join(root, "probeshim-release-key.asc")
	for p, data := range map[string][]byte{
		key: pub,
		filepath.Join(root, "var/lib/dpkg/status"):  nil,
		filepath.Join(root, "apt.conf"):             nil, // not the machine\'s
		filepath.Join(root, "etc/apt/sources.list"): []byte(fmt.Sprintf("deb [signed-by=%s] file:%s %s %s\n", key, dir, aptSuite, aptComponent)),
	} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := []string{"-o", "Dir=" + root, "-o", "Dir::State::status=" + root + "/var/lib/dpkg/status",
		"-o", "APT::Architecture=amd64", "-o", "APT::Architectures::=amd64", "-o", "APT::Architectures::=arm64",
		"-o", "Debug::NoLocking=1"}
	if os.Geteuid() == 0 {
		opts = append(opts, "-o", "APT::Sandbox::User=root") // _apt could not read the test's 0700 folders
	}
	apt := func(cmd string, args ...string) string {
		c := exec.Command(cmd, append(append([]string{}, opts...), args...)...)
		c.Dir = filepath.Join(root, "download")
		c.Env = append(os.Environ(), "APT_CONFIG="+filepath.Join(root, "apt.conf"), "LC_ALL=C")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", cmd, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := apt("apt-get", "update")
	if strings.Contains(out, "W:") || strings.Contains(out, "E:") || strings.Contains(out, "Ign:") {
		t.Fatalf("apt-get update warned:\n%s", out)
	}
	for arch, deb := range debs {
		pkg := "probeshim:" + arch
		apt("apt-get", "download", pkg)
		got, err := filepath.Glob(filepath.Join(root, "download", "probeshim_*_"+arch+".deb"))
		if err != nil || len(got) != 1 {
			t.Fatalf("apt-get download %s wrote %v", pkg, got)
		}
		want, _ := os.ReadFile(deb)
		if data, _ := os.ReadFile(got[0]); !bytes.Equal(data, want) {
			t.Errorf("apt-get download %s: not the package", pkg)
		}
	}
}

// checkRPMRepo checks the dnf repository as dnf reads it: repomd.xml is signed by pub and names
// each metadata file with its checksum and size; primary lists the n packages.
func checkRPMRepo(t *testing.T, dir string, pub []byte, n int) {
	t.Helper()
	repomd, err := os.ReadFile(filepath.Join(dir, "repodata", "repomd.xml"))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := os.ReadFile(filepath.Join(dir, "repodata", "repomd.xml.asc"))
	if err != nil {
		t.Fatal(err)
	}
	verifyDetached(t, pub, repomd, sig)
	gpgv(t, pub, filepath.Join(dir, "repodata", "repomd.xml.asc"), filepath.Join(dir, "repodata", "repomd.xml"))
	text := string(repomd)
	for _, typ := range []string{"primary", "filelists", "other"} {
		i := strings.Index(text, `<data type="`+typ+`">`)
		if i < 0 {
			t.Errorf("repomd.xml has no %s", typ)
			continue
		}
		block := text[i:]
		sum := between(block, `<checksum type="sha256">`, "<")
		href := between(block, `<location href="`, `"`)
		data, err := os.ReadFile(filepath.Join(dir, href))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if s := sha256.Sum256(data); hex.EncodeToString(s[:]) != sum {
			t.Errorf("%s: checksum %s in repomd.xml, file has %x", href, sum, s)
		}
		if typ == "primary" {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			xml, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(xml), `<package type="rpm">`); got != n {
				t.Errorf("primary lists %d packages, want %d", got, n)
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(dir, "probeshim.repo")); err != nil || !strings.Contains(string(data), "repo_gpgcheck=1") {
		t.Errorf("probeshim.repo: %v\n%s", err, data)
	}
}

func md5Hex(data []byte) string {
	s := md5.Sum(data)
	return hex.EncodeToString(s[:])
}

func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return v
}

// verifyDetached checks the armored detached signature sig of data against the public key pub.
func verifyDetached(t *testing.T, pub, data, sig []byte) *packet.Signature {
	t.Helper()
	block, err := armor.Decode(bytes.NewReader(sig))
	if err != nil || block.Type != openpgp.SignatureType {
		t.Fatalf("not an armored signature: %v", err)
	}
	s, _, err := openpgp.VerifyDetachedSignature(keyRing(t, pub), bytes.NewReader(data), block.Body, nil)
	if err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	return s
}

func keyRing(t *testing.T, pub []byte) openpgp.EntityList {
	t.Helper()
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(pub))
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// gpgv verifies with GnuPG's gpgv, as apt does, when it is installed (make release installs it).
func gpgv(t *testing.T, pub []byte, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("gpgv"); err != nil {
		t.Log("gpgv missing: signatures checked with go-crypto only")
		return
	}
	block, err := armor.Decode(bytes.NewReader(pub))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(block.Body)
	if err != nil {
		t.Fatal(err)
	}
	ring := filepath.Join(t.TempDir(), "keyring.gpg")
	if err := os.WriteFile(ring, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gpgv", append([]string{"--keyring", ring}, args...)...).CombinedOutput(); err != nil {
		t.Errorf("gpgv %v: %v\n%s", args, err, out)
	}
}

func sha256sumCheck(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Log("sha256sum missing: SHA256SUMS not checked with it")
		return
	}
	c := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
}

// writeTestKey writes an armored Ed25519 private key created at created and returns its file.
func writeTestKey(t *testing.T, created time.Time) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key.asc")
	if err := os.WriteFile(p, testpki.OpenPGPKey(t, created), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeDeb returns a small .deb for arch: control.tar.gz with a control file, data.tar.gz with
// usr/bin/probeshim.
func fakeDeb(t *testing.T, arch string) []byte {
	t.Helper()
	control := fmt.Sprintf("Package: probeshim\nVersion: 1.2.3-1\nArchitecture: %s\nMaintainer: probeshim developers <probeshim@users.noreply.github.com>\n"+
		"Installed-Size: 1\nSection: admin\nPriority: optional\nDescription: node service\n second line\n .\n third paragraph\n", arch)
	tgz := func(name, data string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		if err := tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	var ar bytes.Buffer
	ar.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{
		{"debian-binary", []byte("2.0\n")},
		{"control.tar.gz", tgz("control", control)},
		{"data.tar.gz", tgz("usr/bin/probeshim", "binary for "+arch)},
	} {
		fmt.Fprintf(&ar, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, 0, 0, 0, "100644", len(m.data))
		ar.Write(m.data)
		if len(m.data)%2 == 1 {
			ar.WriteByte('\n')
		}
	}
	return ar.Bytes()
}

// treeSums maps every file under dir (its path from dir) to its SHA-256.
func treeSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s := sha256.Sum256(data)
		sums[filepath.ToSlash(rel)] = hex.EncodeToString(s[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// trackCheckout stats every file of the checkout from the test process: Go's test cache then keys
// this test's result on them (it tracks what the test itself opens or stats, not what the tools
// it runs read), so a change anywhere runs it again.
func trackCheckout(t *testing.T, root string) {
	t.Helper()
	out, err := run(context.Background(), root, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(out, "\x00") {
		if f != "" {
			_, _ = os.Stat(filepath.Join(root, f))
		}
	}
}

// TestChartHook runs the chart step against two Makefiles: one without a chart target (skipped,
// no error) and one whose chart target writes the package into CHART_DIST.
func TestChartHook(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make missing")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		makefile string
		want     int
	}{
		{"all:\n\ttrue\n", 0},
		{"chart:\n\tmkdir -p $(CHART_DIST) && touch $(CHART_DIST)/probeshim-1.2.3.tgz\n", 1},
	} {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "Makefile"), []byte(tc.makefile), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := chart(ctx, root, filepath.Join(root, "out"))
		if err != nil || len(got) != tc.want {
			t.Errorf("Makefile %q: charts %v, %v; want %d", tc.makefile, got, err, tc.want)
		}
	}
}

// checkKrewManifest checks the release's krew manifest names every plugin archive with its digest
// (sums: the release's files and their SHA-256), and that the linux/amd64 plugin answers
// --version with the release's version.
func checkKrewManifest(t *testing.T, out string, sums map[string]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, krewManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if !semver.IsValid(m.Spec.Version) || len(m.Spec.Platforms) != len(pluginPlatforms) {
		t.Fatalf("krew manifest: version %q, %d platforms", m.Spec.Version, len(m.Spec.Platforms))
	}
	for _, p := range m.Spec.Platforms {
		name := path.Base(p.URI)
		if sums[name] == "" || p.SHA256 != sums[name] || !strings.HasSuffix(path.Dir(p.URI), "/"+m.Spec.Version) {
			t.Errorf("krew manifest: %s with sha256 %s; the release has %q", p.URI, p.SHA256, sums[name])
		}
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return
	}
	f, err := os.Open(filepath.Join(out, pluginArchive(ociimage.Platform{OS: "linux", Arch: "amd64"})))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	exe, found, err := tarEntry(zr, kubectlPlugin.name)
	if err != nil || !found {
		t.Fatalf("%s in its archive: found %v, %v", kubectlPlugin.name, found, err)
	}
	p := filepath.Join(t.TempDir(), kubectlPlugin.name)
	if err := os.WriteFile(p, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(p, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), os.Getenv("PROBESHIM_VERSION")) {
		t.Errorf("%s --version: %s (%v), want its version %s", kubectlPlugin.name, got, err, os.Getenv("PROBESHIM_VERSION"))
	}
}

// The release workflow runs make release with the publishing switch and nothing else of the
// project: any other step would be one the dry run never exercises.
func TestWorkflow(t *testing.T) {
	data, err := os.ReadFile("../../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	// YAML 1.1 reads the key on as true, as sigs.k8s.io/yaml does (GitHub reads it as "on").
	var wf struct {
		On struct {
			Push struct {
				Tags []string `json:"tags"`
			} `json:"push"`
		} `json:"true"`
		Jobs map[string]struct {
			Steps []struct {
				Name string `json:"name"`
				Uses string `json:"uses"`
				Run  string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(data, &wf); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(wf.On.Push.Tags, []string{"v*"}) || len(wf.Jobs) != 1 {
		t.Fatalf("the workflow runs on %v with %d jobs; want tags v* and one job", wf.On.Push.Tags, len(wf.Jobs))
	}
	releases := 0
	for _, job := range wf.Jobs {
		for _, st := range job.Steps {
			if st.Uses != "" {
				// Sources, Go and the upload: what a local run has already.
				if !strings.HasPrefix(st.Uses, "actions/checkout@") && !strings.HasPrefix(st.Uses, "actions/setup-go@") &&
					!strings.HasPrefix(st.Uses, "softprops/action-gh-release@") {
					t.Errorf("step %q uses %s", st.Name, st.Uses)
				}
				continue
			}
			for _, line := range strings.Split(st.Run, "\n") {
				if f := strings.Fields(line); len(f) > 0 && f[0] == "make" {
					if len(f) < 3 || f[1] != "release" || f[2] != "PUBLISH=1" {
						t.Errorf("step %q runs %q; the only make target is release PUBLISH=1", st.Name, line)
					}
					releases++
				}
				if strings.Contains(line, "go run") || strings.Contains(line, "go build") || strings.Contains(line, "hack/") {
					t.Errorf("step %q runs %q: a step of the project's own the dry run does not run", st.Name, line)
				}
			}
		}
	}
	if releases != 1 {
		t.Errorf("make release runs %d times, want once", releases)
	}
}
