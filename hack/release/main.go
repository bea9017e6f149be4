// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Command release builds a probeshim release into dist/release/<version>/ (`make release`, issue 33),
// a dry run unless told to publish:
//
//   - probeshim_<version>_linux_<arch>.tar.gz: the three binaries, LICENSE and README.md;
//   - the node service's .deb and .rpm (packaging/build.sh);
//   - kubectl-probeshim_<os>_<arch>.tar.gz (.zip on Windows), the kubectl plugin for linux, darwin
//     and windows, and probeshim.yaml, its krew manifest naming those archives and their digests;
//   - probeshim-cluster-<tag>.oci.tar, the image index as an OCI layout (hack/image);
//   - the Helm chart, when the Makefile has a chart target (see chart);
//   - <artifact>.cdx.json, a CycloneDX SBOM per archive, package and image (cyclonedx-gomod);
//   - probeshim_<version>_changelog.md, the commits since the previous tag;
//   - SHA256SUMS, and <file>.asc, an armored detached OpenPGP signature of SHA256SUMS and of every
//     archive, package, image and chart;
//   - repo/: the apt and dnf repositories as static files, signed, with the sources and .repo
//     files users install, and probeshim-release-key.asc, the public key.
//
// The archives' binaries are the very files the packages and the image ship (read back from them),
// so each binary is built once. Everything but the signatures is reproducible: every date is the
// commit's (SOURCE_DATE_EPOCH), and two runs of one commit write the same bytes. The signatures are
// too, with one key (PROBESHIM_RELEASE_KEY, an armored private key file; its passphrase, if any, in
// PROBESHIM_RELEASE_KEY_PASSPHRASE): they are dated the commit's time and Ed25519 and RSA
// signatures are deterministic. Without a key, a dry run signs with a throwaway key, whose public
// half it writes as probeshim-release-key.asc like a real one.
//
//	go run ./hack/release [-out dir] [-repo-url https://…] [-publish registry.example/probeshim [-insecure]]
//	go run ./hack/release -apt-repo dir [-repo-url …] package.deb...
//
// -apt-repo writes only an apt repository of the given packages into dir/apt, signed as a release
// signs it (the same key rules), with its sources file and dir/probeshim-release-key.asc: the package
// tests install from it with apt-get, as users install from the published one.
//
// -publish also pushes the image index to <registry>/probeshim-cluster:<tag> (hack/image -push) and
// the chart to <registry>/charts/probeshim:<version> (hack/chart -push), after everything else
// succeeded, and signs both there with cosign; it needs a real release key and cosign's key
// (PROBESHIM_COSIGN_KEY, its password in COSIGN_PASSWORD).
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/probeshim/probeshim/internal/build/command"
	"github.com/probeshim/probeshim/internal/build/cosign"
	"github.com/probeshim/probeshim/internal/build/ociimage"
)

// arches are the release's Go architectures (all linux), as ociimage.Platforms.
var arches = []string{"amd64", "arm64"}

// A binary of the release: its name and main package.
type binary struct{ name, pkg string }

var (
	node    = binary{"probeshim", "./shim/cmd/probeshim"}
	metrics = binary{"probeshim-metrics", "./shim/cmd/probeshim-metrics"}
	cluster = binary{"probeshim-cluster", ociimage.ClusterPkg}
)

// Where the node service's package installs its binaries (packaging/nfpm.yaml).
var debPaths = map[string]string{
	node.name:    "usr/bin/probeshim",
	metrics.name: "usr/libexec/probeshim/probeshim-metrics",
}

// defaultRepoURL is the repositories' address in the .repo and sources files until the publishing
// part names the real one (REPO_URL).
const defaultRepoURL = "https://probeshim.example.invalid/repo"

type options struct {
	root        string // the repository
	out         string // the release folder; "" for dist/release/<version>
	keyFile     string
	passphrase  string
	cosignKey   string // cosign's private key, for the image's and the chart's signatures when publishing
	repoURL     string
	downloadURL string // where the release's files are downloaded from, before the version (the krew manifest's)
	pushTo      string // push the image index under this registry; "" for a dry run
	insecure    bool
	report      io.Writer // the list of files written
	aptOnly     string    // -apt-repo: write only an apt repository of the arguments' packages here
}

func main() {
	o := options{keyFile: os.Getenv("PROBESHIM_RELEASE_KEY"), passphrase: os.Getenv("PROBESHIM_RELEASE_KEY_PASSPHRASE"),
		cosignKey: os.Getenv("PROBESHIM_COSIGN_KEY"), report: os.Stdout}
	flag.StringVar(&o.out, "out", "", "release folder (default dist/release/<version>)")
	flag.StringVar(&o.repoURL, "repo-url", defaultRepoURL, "where the apt and dnf repositories (repo/) will be served, for the sources and .repo files")
	flag.StringVar(&o.downloadURL, "download-url", defaultDownloadURL, "where the release's files will be downloaded from, before the version, for the krew manifest")
	flag.StringVar(&o.pushTo, "publish", "", "push the image index to <registry>/probeshim-cluster:<tag> and the chart to <registry>/charts/probeshim:<version> after the build, e.g. registry.example/probeshim")
	flag.BoolVar(&o.insecure, "insecure", false, "push over plain HTTP")
	flag.StringVar(&o.aptOnly, "apt-repo", "", "write only a signed apt repository of the .deb files named as arguments into this folder (package tests)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch {
	case o.aptOnly != "":
		err = aptRepoOnly(o, flag.Args())
	case flag.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q (package files go with -apt-repo)", flag.Args())
	default:
		if o.root, err = os.Getwd(); err == nil {
			err = release(ctx, o)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// artifact is one released file and the binaries (per architecture) it ships, for its SBOM.
type artifact struct {
	path string
	typ  cdx.ComponentType
	bins []archBinary
}

// archBinary is a binary built for one platform.
type archBinary struct {
	binary
	platform ociimage.Platform
}

// linux is b built for linux/arch, as the node's and the cluster's binaries are.
func linux(b binary, arch string) archBinary {
	return archBinary{b, ociimage.Platform{OS: "linux", Arch: arch}}
}

// release builds the whole release into o.out; see the package comment. Each step writes into
// the release folder what the next ones read.
func release(ctx context.Context, o options) error {
	start := time.Now()
	r, err := newBuild(ctx, o)
	if err != nil {
		return err
	}
	defer os.RemoveAll(r.tmp)
	step := stepper()
	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{
		{"packages", r.packages},
		{"image", r.image},
		{"archives", r.archives},
		{"kubectl plugin", r.plugin},
		{"chart", r.chart},
		{"SBOMs", r.sboms},
		{"changelog and SHA256SUMS", r.sums},
		{"repositories", r.repositories},
		{"signatures", r.signatures},
		{"publish", r.publish},
	} {
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		step(s.name)
	}
	return summary(o.report, r.out, time.Since(start))
}

// build is one release in the making.
type build struct {
	options
	git ociimage.Git
	// modVersion is the main module's version (goModuleVersion): semver, as the SBOMs and the
	// krew manifest need it.
	modVersion string
	out, tmp   string
	signer     *signer
	debs       []string // the node service's packages, in out
	rpms       []string
	imageDist  string     // hack/image's output folder (the OCI layout)
	imageTar   string     // the image's artifact, in out
	artifacts  []artifact // what gets an SBOM and a signature
}

func newBuild(ctx context.Context, o options) (*build, error) {
	g, err := ociimage.FromGit(ctx, o.root)
	if err != nil {
		return nil, err
	}
	if o.pushTo != "" && o.keyFile == "" {
		return nil, errors.New("-publish needs the release key: set PROBESHIM_RELEASE_KEY")
	}
	if o.pushTo != "" && o.cosignKey == "" {
		return nil, errors.New("-publish needs cosign's key for the image and chart signatures: set PROBESHIM_COSIGN_KEY (and COSIGN_PASSWORD)")
	}
	if o.pushTo != "" && strings.HasSuffix(g.Revision, "+dirty") {
		return nil, errors.New("-publish needs a clean checkout: commit or stash the changes")
	}
	// Every step, and every tool it runs, dates what it writes the same: the commit's time.
	if err := os.Setenv("SOURCE_DATE_EPOCH", strconv.FormatInt(g.Created.Unix(), 10)); err != nil {
		return nil, err
	}
	if err := os.Setenv("PROBESHIM_VERSION", g.Version); err != nil {
		return nil, err
	}
	r := &build{options: o, git: g, out: o.out}
	if r.modVersion, err = goModuleVersion(ctx, o.root, g); err != nil {
		return nil, err
	}
	if r.downloadURL == "" {
		r.downloadURL = defaultDownloadURL
	}
	if r.out == "" {
		r.out = filepath.Join(o.root, "dist", "release", g.Version)
	}
	if r.out, err = filepath.Abs(r.out); err != nil {
		return nil, err
	}
	if r.signer, err = newSigner(o.keyFile, o.passphrase, g.Created); err != nil {
		return nil, fmt.Errorf("release key: %w", err)
	}
	if r.signer.ephemeral {
		logf("signing with a throwaway key (no PROBESHIM_RELEASE_KEY): a dry run's signatures prove nothing")
	}
	if err := os.RemoveAll(r.out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return nil, err
	}
	if r.tmp, err = os.MkdirTemp("", "probeshim-release-"); err != nil {
		return nil, err
	}
	logf("probeshim %s (commit %s, dated %s) into %s", g.Version, g.Revision, g.Created.Format(time.RFC3339), r.out)
	return r, nil
}

// packages builds the node service's .deb and .rpm into out with packaging/build.sh.
func (r *build) packages(ctx context.Context) error {
	out, err := run(ctx, r.root, append(os.Environ(), "PROBESHIM_DIST="+r.out), "packaging/build.sh")
	if err != nil {
		return err
	}
	for _, p := range strings.Fields(out) {
		switch filepath.Ext(p) {
		case ".deb":
			r.debs = append(r.debs, absIn(r.root, p))
		case ".rpm":
			r.rpms = append(r.rpms, absIn(r.root, p))
		}
	}
	if len(r.debs) != len(arches) || len(r.rpms) != len(arches) {
		return fmt.Errorf("packaging/build.sh wrote %d .deb and %d .rpm, want %d of each", len(r.debs), len(r.rpms), len(arches))
	}
	return nil
}

// image builds the cluster image with hack/image into tmp and moves its tarball into out.
func (r *build) image(ctx context.Context) error {
	r.imageDist = filepath.Join(r.tmp, "image")
	if _, err := run(ctx, r.root, nil, "go", "run", "./hack/image", "-dist", r.imageDist); err != nil {
		return err
	}
	r.imageTar = filepath.Join(r.out, ociimage.ClusterTitle+"-"+ociimage.Tag(r.git.Version)+".oci.tar")
	return os.Rename(filepath.Join(r.imageDist, filepath.Base(r.imageTar)), r.imageTar)
}

// archives reads the binaries back from the packages and the image and writes each
// architecture's archive of them.
func (r *build) archives(_ context.Context) error {
	for _, arch := range arches {
		deb := findArch(r.debs, "_"+arch+".deb")
		data, err := os.ReadFile(deb)
		if err != nil {
			return err
		}
		packaged, err := debFiles(data, "data.tar", debPaths[node.name], debPaths[metrics.name])
		if err != nil {
			return fmt.Errorf("%s: %w", deb, err)
		}
		exes := map[string][]byte{node.name: packaged[debPaths[node.name]], metrics.name: packaged[debPaths[metrics.name]]}
		exes[cluster.name], err = imageFile(filepath.Join(r.imageDist, "image", ociimage.ClusterTitle),
			v1.Platform{OS: "linux", Architecture: arch}, ociimage.ClusterBinary)
		if err != nil {
			return err
		}
		var files []tarFile
		a := artifact{path: filepath.Join(r.out, fmt.Sprintf("probeshim_%s_linux_%s.tar.gz", r.git.Version, arch)), typ: cdx.ComponentTypeFile}
		for _, b := range []binary{node, metrics, cluster} {
			p := filepath.Join(r.tmp, "bin", arch, b.name)
			if err := writeFile(p, exes[b.name]); err != nil {
				return err
			}
			files = append(files, tarFile{name: b.name, mode: 0o755, src: p})
			a.bins = append(a.bins, linux(b, arch))
		}
		for _, doc := range []string{"LICENSE", "README.md"} {
			if _, err := os.Stat(filepath.Join(r.root, doc)); err == nil {
				files = append(files, tarFile{name: doc, mode: 0o644, src: filepath.Join(r.root, doc)})
			}
		}
		if err := writeTarGzFile(a.path, files, r.git.Created); err != nil {
			return err
		}
		r.artifacts = append(r.artifacts, a)
	}
	for _, arch := range arches {
		for _, pkg := range []string{findArch(r.debs, "_"+arch+".deb"), findArch(r.rpms, "."+rpmArches[arch]+".rpm")} {
			r.artifacts = append(r.artifacts, artifact{path: pkg, typ: cdx.ComponentTypeFile,
				bins: []archBinary{linux(node, arch), linux(metrics, arch)}})
		}
	}
	image := artifact{path: r.imageTar, typ: cdx.ComponentTypeContainer}
	for _, arch := range arches {
		image.bins = append(image.bins, linux(cluster, arch))
	}
	r.artifacts = append(r.artifacts, image)
	return nil
}

// chart copies the chart packages of the Makefile's chart target (which owns the chart's
// packaging and version) into out.
func (r *build) chart(ctx context.Context) error {
	charts, err := chart(ctx, r.root, filepath.Join(r.tmp, "chart"))
	if err != nil {
		return err
	}
	for _, c := range charts {
		dst := filepath.Join(r.out, filepath.Base(c))
		if err := copyFile(c, dst); err != nil {
			return err
		}
		// No SBOM: the chart holds templates, no Go code; the image it deploys has one.
		r.artifacts = append(r.artifacts, artifact{path: dst})
	}
	return nil
}

// sboms writes <artifact>.cdx.json for every artifact that ships binaries.
func (r *build) sboms(ctx context.Context) error {
	gen, err := newSBOMGen(ctx, r.root, r.tmp, r.modVersion)
	if err != nil {
		return err
	}
	for _, a := range r.artifacts {
		if len(a.bins) == 0 {
			continue
		}
		var apps []*cdx.BOM
		for _, b := range a.bins {
			bom, err := gen.app(ctx, b.pkg, b.platform, r.modVersion)
			if err != nil {
				return err
			}
			apps = append(apps, bom)
		}
		data, err := os.ReadFile(a.path)
		if err != nil {
			return err
		}
		bom := mergeSBOM(filepath.Base(a.path), a.typ, r.git.Version, data, apps, r.git.Created)
		if err := writeSBOM(a.path+".cdx.json", bom); err != nil {
			return err
		}
	}
	return nil
}

// sums writes the changelog, then SHA256SUMS of everything in out.
func (r *build) sums(ctx context.Context) error {
	notes, err := changelog(ctx, r.root, r.git.Version)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(r.out, fmt.Sprintf("probeshim_%s_changelog.md", r.git.Version)), notes); err != nil {
		return err
	}
	sums, err := sha256sums(r.out)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(r.out, "SHA256SUMS"), sums)
}

// repositories writes repo/: the apt and dnf repositories, their sources and .repo files, and the
// public key (also beside the artifacts).
func (r *build) repositories(ctx context.Context) error {
	pub, err := r.signer.publicKey()
	if err != nil {
		return err
	}
	repo := filepath.Join(r.out, "repo")
	if err := aptRepo(filepath.Join(repo, "apt"), r.debs, r.signer, r.git.Created, r.git.Version); err != nil {
		return fmt.Errorf("apt: %w", err)
	}
	if err := rpmRepo(ctx, filepath.Join(repo, "rpm"), r.rpms, r.signer, r.git.Created); err != nil {
		return fmt.Errorf("dnf: %w", err)
	}
	for p, data := range map[string][]byte{
		filepath.Join(r.out, keyFile):                   pub,
		filepath.Join(repo, keyFile):                    pub,
		filepath.Join(repo, "rpm", "probeshim.repo"):    dnfRepoFile(r.repoURL),
		filepath.Join(repo, "apt", "probeshim.sources"): aptSourcesFile(r.repoURL),
	} {
		if err := writeFile(p, data); err != nil {
			return err
		}
	}
	return nil
}

// aptRepoOnly is -apt-repo: the repository of debs in o.aptOnly/apt, its sources file and the
// public key, dated now (a test's publication, not a release's reproducible one).
func aptRepoOnly(o options, debs []string) error {
	if len(debs) == 0 {
		return errors.New("-apt-repo: name the .deb files to put in the repository")
	}
	date := time.Now().UTC().Truncate(time.Second)
	s, err := newSigner(o.keyFile, o.passphrase, date)
	if err != nil {
		return err
	}
	pub, err := s.publicKey()
	if err != nil {
		return err
	}
	if err := aptRepo(filepath.Join(o.aptOnly, "apt"), debs, s, date, "packages"); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(o.aptOnly, keyFile), pub); err != nil {
		return err
	}
	return writeFile(filepath.Join(o.aptOnly, "apt", "probeshim.sources"), aptSourcesFile(o.repoURL))
}

// signatures writes <file>.asc of SHA256SUMS and of every artifact.
func (r *build) signatures(_ context.Context) error {
	toSign := []string{filepath.Join(r.out, "SHA256SUMS")}
	for _, a := range r.artifacts {
		toSign = append(toSign, a.path)
	}
	for _, p := range toSign {
		if err := r.signer.detachFile(p); err != nil {
			return err
		}
	}
	return nil
}

// publish pushes the image index (hack/image -push) and the chart (hack/chart -push), when asked
// to, and signs both where they were pushed with cosign (PROBESHIM_COSIGN_KEY; internal/build/cosign,
// as e2e/cluster signs and verifies them on the rig).
func (r *build) publish(ctx context.Context) error {
	if r.pushTo == "" {
		logf("dry run: nothing pushed (PUBLISH=1 REGISTRY=… pushes the image and the chart and signs them)")
		return nil
	}
	registry := strings.TrimSuffix(r.pushTo, "/")
	var flags []string
	if r.insecure {
		flags = append(flags, "-insecure")
	}
	bin, err := cosign.Binary(ctx, r.root)
	if err != nil {
		return err
	}
	tool := cosign.Tool{Bin: bin, PlainHTTP: r.insecure, Password: os.Getenv("COSIGN_PASSWORD")}
	// The chart is packaged again: one commit packages to the same bytes as the release's tgz.
	for _, argv := range [][]string{
		append([]string{"go", "run", "./hack/image", "-push", registry + "/" + ociimage.ClusterTitle}, flags...),
		append([]string{"go", "run", "./hack/chart", "-dist", filepath.Join(r.tmp, "chart-push"), "-push", registry}, flags...),
	} {
		pushed, err := run(ctx, r.root, nil, argv...)
		if err != nil {
			return err
		}
		logf("%s", pushed)
		// Both print <repo>@<digest> last.
		lines := strings.Split(strings.TrimSpace(pushed), "\n")
		ref := lines[len(lines)-1]
		if err := tool.Sign(ctx, r.cosignKey, ref); err != nil {
			return err
		}
		logf("signed %s (cosign)", ref)
	}
	// What users verify both with (`cosign verify --key probeshim-cosign.pub …`), on the release page.
	pub, err := tool.PublicKey(ctx, r.cosignKey)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(r.out, cosignPubFile), []byte(pub+"\n"))
}

// cosignPubFile is cosign's public key in the release folder, written when publishing.
const cosignPubFile = "probeshim-cosign.pub"

// keyFile is the public key's name, beside the artifacts and at the repositories' root.
const keyFile = "probeshim-release-key.asc"

// rpmArches maps Go's architecture names to rpm's (nfpm's mapping).
var rpmArches = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

func findArch(paths []string, suffix string) string {
	for _, p := range paths {
		if strings.HasSuffix(p, suffix) {
			return p
		}
	}
	return ""
}

func absIn(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// sha256sums is SHA256SUMS (the format `sha256sum -c` reads) of every file in dir but the
// signatures and the key: the artifacts, their SBOMs and the changelog. The repositories under
// repo/ carry checksums of their own (Release, repomd.xml).
func sha256sums(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, e := range entries { // ReadDir sorts by name
		n := e.Name()
		if !e.Type().IsRegular() || n == "SHA256SUMS" || strings.HasSuffix(n, ".asc") {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, n)
	}
	return b.Bytes(), nil
}

// fileSHA256 is the hex SHA-256 of the file at p.
func fileSHA256(p string) (string, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// summary prints every file of the release with its size.
func summary(w io.Writer, out string, took time.Duration) error {
	var lines []string
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		lines = append(lines, fmt.Sprintf("%10d  %s", fi.Size(), rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(lines)
	_, err = fmt.Fprintf(w, "%s (%s):\n%s\n", out, took.Round(time.Second), strings.Join(lines, "\n"))
	return err
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "release: "+format+"\n", args...)
}

// stepper returns a function that logs a step's name and how long it took since the last.
func stepper() func(name string) {
	last := time.Now()
	return func(name string) {
		logf("%s (%s)", name, time.Since(last).Round(100*time.Millisecond))
		last = time.Now()
	}
}

// run is command.Output.
var run = command.Output

// runCombined is run returning stdout and stderr together, also on failure.
func runCombined(ctx context.Context, dir string, env []string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}
