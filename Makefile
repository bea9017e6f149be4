# probeshim — build and test entry points. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
# golangci-lint has a module of its own: its many dependencies must not move controller-gen's or nfpm's.
# `go tool` builds it from the module proxy once and keeps the binary in Go's build cache.
GOLANGCI_LINT := $(GO) tool -modfile=hack/tools/golangci-lint/go.mod golangci-lint
# LINT_FLAGS: e.g. LINT_FLAGS=--fix, or --concurrency 1 on a shared machine.
LINT_FLAGS ?=
# Packages whose tests need no root and no rig: make unit runs them without the suites against a real
# API server (envtest), make integration runs those.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e '/e2e' -e '/packaging$$')
INTEGRATION_PKGS = $(shell $(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | \
	grep -v -e '/e2e' | grep -E ' .*(internal/testkit/kubebin|cluster/internal/testenv|controller-runtime/pkg/envtest)' | cut -d' ' -f1)
# The package tests: build the .deb and .rpm, boot systemd containers (root, about a minute).
PACKAGE_TEST_PKGS = ./packaging ./hack/release
# In make test they run at nice 19 beside both e2e rows: with a Go cache that lacked the arm64 builds and a
# row's Kubernetes building beside them, the cross builds alone took 35 minutes (2026-12-04); 55 minutes is
# still within the e2e lanes' own time.
PACKAGE_TEST_TIMEOUT ?= 55m
# Real-component suites: each package is one test binary that brings up one rig.
E2E_PKGS ?= ./e2e/...
# The test matrix (docs/install/node.md, "Supported versions"; e2e/rowenv.sh builds a row, e2e/rig/row.go names them):
# row 1 runs E2E_PKGS, row 2 the suites whose outcome depends on the Kubernetes and containerd versions.
# ROW=<row> runs one row; make e2e without it runs both.
ROWS := k1.37-c2.4 k1.35-c1.7
ROW ?=
ROW2_E2E_PKGS ?= ./e2e/node/ ./e2e/cluster/ ./e2e/crr/ ./e2e/criproxy/ ./e2e/packaged/
# Tests of those packages that row 2 leaves to row 1: they measure the probe engine's own scheduling
# and memory under hostile or flooding tenants, which no Kubernetes or containerd version changes
# (the runtime's exec and netns paths they use are row 2's in TestNodeService).
ROW2_E2E_SKIP ?= ^(TestHostileTargets|TestNamespaceCannotStallAnother)$$
E2E_TIMEOUT ?= 60m
# E2E_P: how many e2e packages run side by side (lanes), each on a rig of its own (rig.PackageRigName);
# most of their time is waiting on the cluster. E2E_P=1: one after another on the one default rig. At 3,
# row 2's tenant-isolation and hand-over timings failed on 2 cores (5 s where 1 s is due).
E2E_P ?= 2
# The slowest e2e packages (make test's table) start first, so that none of them starts last alone.
E2E_SLOW_FIRST := twonode decider criproxy node crr cluster upgrade
# The packages of $(1) that have tests (go test of the others only says "no test files").
with_tests = $(shell $(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' $(1))
slow_first = $(foreach s,$(E2E_SLOW_FIRST),$(filter %/e2e/$(s),$(1))) $(filter-out $(addprefix %/e2e/,$(E2E_SLOW_FIRST)),$(1))
RIG_NODES ?= 1
export PROBESHIM_CACHE ?= /var/cache/probeshim
# Tests run through hack/testreport: go test's usual lines, one closing "N passed, N failed, N skipped",
# and in CI (CI=true) a failure for every skipped test hack/testreport/allowed-skips.txt does not name.
GOTEST = set -o pipefail; $(GO) test -json
REPORT = | $(GO) run ./hack/testreport

.PHONY: all build lint unit integration test e2e bench generate generate-code verify-generated kube-bins row-bins critest-bin rig-up rig-down fmt vet clean \
	packages package-test demo demo-down fresh-check deps docs image image-push chart bench-run e2e-repeat release

all: build

build:
	$(GO) build ./...

## unit: fast tests (seconds) plus lint and the check that generated code is current; the suites against a
## real API server skip here (PROBESHIM_UNIT_ONLY) and run in make integration. Results of unchanged
## packages come from Go's test cache (these tests read nothing outside their package but what Go tracks);
## UNIT_FLAGS=-count=1 runs everything again.
## UNIT_SKIP_INTEGRATION=1 (make test) leaves out the packages make integration runs whole right after, whose
## test binaries would otherwise be linked and run twice (about a minute on 2 cores).
UNIT_FLAGS ?=
UNIT_SKIP_INTEGRATION ?=
unit: deps-unit verify-generated vet lint docs
	@export PROBESHIM_UNIT_ONLY=1; export PROBESHIM_PROMTOOL=$$(hack/promtool.sh) || exit 1; \
		$(GOTEST) $(UNIT_FLAGS) $(if $(UNIT_SKIP_INTEGRATION),$(filter-out $(INTEGRATION_PKGS),$(UNIT_PKGS)),$(UNIT_PKGS)) \
			$(REPORT) -stage unit -allow-reason PROBESHIM_UNIT_ONLY

## integration: the tests against a real kube-apiserver and etcd (envtest; no root), every test of
## those packages; on Kubernetes 1.37, or KUBE=1.35 (row 2's: make test leaves it to the row's suites).
## It builds only the binaries these tests run: envtest's two and kubectl (cluster/deploy's kustomize), before
## they start (left to the row's build beside them, kubectl came too late for them on a fresh machine, a race
## that skipped cluster/deploy's suites); with INTEGRATION_BUILD_ROW=1 (make test) the rest of
## the row's binaries build meanwhile at the lowest CPU priority, for the e2e rows after it.
KUBE ?=
INTEGRATION_BUILD_ROW ?=
integration:
	@bin=$$(e2e/kubebin/build.sh $(or $(KUBE),1.37) kube-apiserver etcd kubectl) || exit 1; export PROBESHIM_KUBE_BIN=$$bin; \
		rest=; if [ -n "$(INTEGRATION_BUILD_ROW)" ]; then nice -n 19 e2e/kubebin/build.sh $(or $(KUBE),1.37) >/dev/null & rest=$$!; fi; \
		rc=0; ( $(GOTEST) -count=1 $(INTEGRATION_PKGS) $(REPORT) -stage integration ) || rc=1; \
		[ -z "$$rest" ] || wait $$rest || { echo "integration: building the row's other Kubernetes binaries failed" >&2; rc=1; }; exit $$rc

## test: everything CI runs — unit and integration tests, the package tests and the real-component suites
## on every row of the matrix (TEST_ROWS), stopping after the first stage that fails; the package tests run
## beside the e2e rows (hack/test.sh). It ends with the time table: each stage's wall time and the 15
## slowest suites and tests (kept in $(TEST_TIMES)).
TEST_ROWS ?= $(ROWS)
TEST_TIMES ?= dist/test-times.jsonl
test:
	@MAKE="$(MAKE)" TEST_ROWS="$(TEST_ROWS)" PROBESHIM_TEST_TIMES=$(abspath $(TEST_TIMES)) hack/test.sh

## packages: the .deb and .rpm of the node service in dist/ (nfpm; version from git), linted.
packages: deps-lint
	@pkgs=$$(packaging/build.sh) && packaging/lint.sh $$pkgs && echo "$$pkgs"

## image: the probeshim-cluster image, an OCI image index for linux/amd64 and linux/arm64 (static
## binary, user 65532, no shell; go-containerregistry, no Docker), reproducible: every date is the
## commit's (SOURCE_DATE_EPOCH). Writes the OCI layout dist/image/probeshim-cluster and
## dist/probeshim-cluster-<tag>.oci.tar; prints the tag (the version from git, "~" -> "-",
## "+" -> "_") and the index digest.
image:
	@$(GO) run ./hack/image

## image-push: push that index to $(IMAGE):<tag> and print its digest, e.g.
## make image-push IMAGE=registry.example/probeshim/probeshim-cluster (credentials: docker's
## config.json, as `docker login` or `crane auth login` write it; IMAGE_PUSH_FLAGS=-insecure for HTTP).
IMAGE ?=
IMAGE_PUSH_FLAGS ?=
image-push:
	@if [ -z "$(IMAGE)" ]; then echo "image-push: set IMAGE, e.g. IMAGE=registry.example/probeshim/probeshim-cluster" >&2; exit 2; fi
	@$(GO) run ./hack/image -push $(IMAGE) $(IMAGE_PUSH_FLAGS)

## chart: the Helm chart packaged as dist/probeshim-<version>.tgz, its version and appVersion from git
## (as the image's, "~" -> "-": SemVer), so that it deploys the image `make image` tags for the same
## commit; reproducible (every file's time is the commit's). Prints the path.
CHART_DIST ?=
chart:
	@$(GO) run ./hack/chart $(if $(CHART_DIST),-dist "$(CHART_DIST)")

## release: a release in dist/release/<version>/ (hack/release), a dry run unless PUBLISH=1. For linux/amd64
## and linux/arm64: probeshim_<version>_linux_<arch>.tar.gz (the three binaries, read back from the packages
## and the image, so each is built once; LICENSE, README.md), the node service's .deb and .rpm, the image
## index as probeshim-cluster-<tag>.oci.tar, the chart (make chart CHART_DIST=<folder>), a CycloneDX SBOM per archive, package
## and image (<artifact>.cdx.json, cyclonedx-gomod), the changelog since the previous tag, SHA256SUMS,
## armored OpenPGP signatures (<file>.asc) and repo/: signed apt and dnf repositories as static files, with
## the public key probeshim-release-key.asc. Reproducible: two runs of one commit write the same files, the
## signatures too with one key. The key: PROBESHIM_RELEASE_KEY, an armored private key file (its passphrase,
## if any, in PROBESHIM_RELEASE_KEY_PASSPHRASE); without it a throwaway key whose user ID says DRY RUN signs.
## REPO_URL: where repo/ will be served, for repo/rpm/probeshim.repo and repo/apt/probeshim.sources.
## PUBLISH=1 REGISTRY=registry.example/probeshim: after the release is built, push the image index to
## $(REGISTRY)/probeshim-cluster:<tag> (hack/image's push) and the chart to oci://$(REGISTRY)/charts/probeshim
## (hack/chart -push; `helm install probeshim oci://$(REGISTRY)/charts/probeshim --version <version>`);
## then signs both there with cosign (hack/cosign.sh builds it; the key in PROBESHIM_COSIGN_KEY, its password
## in COSIGN_PASSWORD) and writes the public key as probeshim-cosign.pub; IMAGE_PUSH_FLAGS=-insecure for HTTP;
## credentials from docker's config.json. It needs PROBESHIM_RELEASE_KEY, PROBESHIM_COSIGN_KEY and a clean
## checkout. Uploading the files and the repositories is left to the workflow (.github/workflows/release.yml).
PUBLISH ?=
REGISTRY ?=
REPO_URL ?=
release: deps-release
	@if [ -n "$(filter 1,$(PUBLISH))" ] && [ -z "$(REGISTRY)" ]; then echo "release: PUBLISH needs REGISTRY, e.g. REGISTRY=registry.example/probeshim" >&2; exit 2; fi
	@$(GO) run ./hack/release $(if $(REPO_URL),-repo-url "$(REPO_URL)") $(if $(filter 1,$(PUBLISH)),-publish "$(REGISTRY)" $(IMAGE_PUSH_FLAGS))

## package-test: install/upgrade/remove/purge both packages on a real systemd (systemd-nspawn);
## needs root (skips with a message otherwise); and make release's dry run twice, compared (hack/release).
package-test: deps-lint deps-nspawn deps-release
	@$(GOTEST) -count=1 -v -timeout $(PACKAGE_TEST_TIMEOUT) $(PACKAGE_TEST_PKGS) $(REPORT) -v -stage package-test

## e2e: real kube-apiserver, kubelet, containerd; needs root (skips with a message otherwise). Every row
## of the matrix (ROWS), or ROW=<row> alone, as one queue of packages on E2E_P lanes (hack/e2elanes): a
## free lane takes the next package, of whichever row, so the next row starts while the one before ends.
## The first row's binaries are built before its suites; the later rows' meanwhile at the lowest CPU
## priority (nice 19), beside the first row's suites (on a cold machine that hides the ~12 minutes of
## Kubernetes 1.35 and containerd 1.7).
## cosign (hack/cosign.sh, for e2e/cluster's signature checks) builds meanwhile, once per machine.
e2e: deps-rig deps-runc-build deps-nspawn deps-lint critest-bin
	@if [ "$$(id -u)" != 0 ]; then echo "e2e: skipped, the real-component suites need root"; exit 0; fi; \
	export PROBESHIM_CRITEST_BIN=$$(e2e/critest/build.sh); export PROBESHIM_PROMETHEUS=$$(hack/promtool.sh prometheus) || exit 1; \
	{ hack/cosign.sh >/dev/null 2>&1 & }; \
	args=; for row in $(or $(ROW),$(ROWS)); do \
		if [ $$row = $(firstword $(ROWS)) ]; then args="$$args -row $$row -pkgs '$(call slow_first,$(call with_tests,$(E2E_PKGS)))'"; \
		else args="$$args -row $$row -pkgs '$(call slow_first,$(call with_tests,$(ROW2_E2E_PKGS)))' -skip '$(ROW2_E2E_SKIP)'"; fi; \
	done; eval $(GO) run ./hack/e2elanes -lanes $(E2E_P) -timeout $(E2E_TIMEOUT) $$args

## e2e-repeat: the e2e suites of ROW (default: row 1) N times in a row (default 5), every run whatever the
## one before gave (a flake seen once is worth the next run's evidence too); it ends with which runs failed.
## Each run brings its packages' rigs up as make e2e does.
N ?= 5
e2e-repeat:
	@failed=""; for i in $$(seq 1 $(N)); do echo "== e2e-repeat: run $$i of $(N)"; \
		$(MAKE) --no-print-directory e2e ROW="$(or $(ROW),$(firstword $(ROWS)))" || failed="$$failed $$i"; \
	done; [ -z "$$failed" ] || { echo "e2e-repeat: runs$$failed of $(N) failed"; exit 1; }; echo "e2e-repeat: $(N) runs passed"

## row-bins: the binaries of every row (or ROW's): Kubernetes, containerd, runc, built side by side into
## $(PROBESHIM_CACHE) (a cold build of all of them is about 25 minutes on 2 cores; a warm one a no-op).
row-bins: deps-runc-build
	@pids=; for row in $(or $(ROW),$(ROWS)); do e2e/rowenv.sh $$row >/dev/null & pids="$$pids $$!"; done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; exit $$rc

## bench: benchmarks that print numbers: the engine and handlers alone, the cluster deployment's memory per
## cached pod (whole, before and slim, through envtest when its binaries are there), then (as root) the node
## service on the rig — probe cost side by side with the kubelet, 100 pods at scale, exec and netns
## dial ratios against a real containerd, CRI latency through the proxy vs containerd directly — and
## the liveness decider's reaction (status Failed to request to kill, p50/p99). In between, the
## decider at scale on a real API server (envtest, no root): 5,000 nodes x 20 liveness probes with 1%
## failing — decision latency, CPU, memory; about 10 minutes. Then a node service going silent (envtest): 20 pods'
## marker conditions Unknown after the grace (p50/p99) and the API writes of the expiry and the recovery; and the same
## on the two-node rig with the real node service killed (kubelet identity, Lease through the heartbeat endpoint).
## The rig benchmarks run once per row of the matrix (ROWS), or on ROW=<row> alone. Everything they print
## is kept in dist/bench.log; the last lines are hack/benchtable's table of the figures that say whether the
## node service is lighter than the kubelet (measured side by side in this run), with the targets.
bench:
	@mkdir -p dist; set -o pipefail; $(MAKE) --no-print-directory bench-run 2>&1 | tee dist/bench.log; rc=$$?; \
	echo; echo "== probeshim against the kubelet and the targets (hack/benchtable < dist/bench.log)"; \
	$(GO) run ./hack/benchtable < dist/bench.log; exit $$rc

bench-run: deps-rig deps-runc-build
	$(GO) test -run '^$$' -bench . -skip '^(BenchmarkDeciderScale|BenchmarkMarkerScale|BenchmarkNodeServiceSilence)$$' -benchtime 1x $(UNIT_PKGS)
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) $(GO) test -count=1 -run '^$$' -bench '^BenchmarkDeciderScale$$' \
		-benchtime 1x -timeout 40m ./cluster/decider/
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) $(GO) test -count=1 -run '^$$' -bench '^BenchmarkMarkerScale$$' \
		-benchtime 1x -timeout 40m ./cluster/controller/nodepodprobe/
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) $(GO) test -count=1 -run '^$$' -bench '^BenchmarkNodeServiceSilence$$' \
		-benchtime 1x ./cluster/controller/heartbeat/
	@if [ "$$(id -u)" != 0 ]; then echo "bench: rig benchmarks skipped, they need root"; exit 0; fi; \
	for row in $(or $(ROW),$(ROWS)); do \
		env=$$(e2e/rowenv.sh $$row) || exit 1; eval "$$env"; echo "== bench row $$row"; \
		$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m -p 1 \
			./e2e/node/ ./e2e/criproxy/ ./e2e/decider/ ./e2e/twonode/ || exit 1; \
	done

## generate: deepcopy code and CRD manifests (controller-gen), the metrics reference docs/metrics.md from
## the collectors the code registers (hack/metricsdoc), the chart's README from its values.yaml and
## values.schema.json (hack/chartdoc), the API reference docs/reference/api.md from the Go types
## (hack/apidoc) and the node configuration reference docs/reference/node-config.md from shim/config
## (hack/configdoc).
generate: generate-code
	$(GO) run ./hack/metricsdoc
	$(GO) run ./hack/chartdoc
	$(GO) run ./hack/apidoc
	$(GO) run ./hack/configdoc
	$(GO) run ./hack/clidoc

# generate-code: what controller-gen writes; hack/verify-generated.sh runs it in a scratch copy of apis/.
generate-code:
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./apis/...
	@# OpenKruise's types that probeshim reads only: deep copies, never CRDs.
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./cluster/internal/kruiseapi/...
	$(TOOLS) controller-gen crd:crdVersions=v1 paths=./apis/... output:crd:artifacts:config=apis/crds
	@# The Helm chart ships the same CRDs (charts/chart_test.go checks the copy).
	mkdir -p charts/probeshim/files/crds && rm -f charts/probeshim/files/crds/*.yaml && cp apis/crds/*.yaml charts/probeshim/files/crds/

## docs: the docs site from docs/ and mkdocs.yml (MkDocs, Material theme; Debian's packages) into
## dist/site, strictly: a warning or a link to a page that does not exist fails it (seconds).
## make unit runs it; hack/docscheck's test checks the links' anchors, which this MkDocs does not.
docs: deps-docs
	@# Debian's jinja2 warns of its own escape sequences: nothing of ours, and noise in every build.
	@PYTHONWARNINGS=ignore::DeprecationWarning mkdocs build --strict --quiet

## verify-generated: fails when deepcopy code, CRD manifests, docs/metrics.md, docs/reference/api.md,
## docs/reference/node-config.md, docs/reference/cli.md or the chart's README are stale.
verify-generated:
	@hack/verify-generated.sh

kube-bins:
	@e2e/kubebin/build.sh >/dev/null

## critest-bin: critest (CRI validation suite, sigs.k8s.io/cri-tools) and ginkgo for e2e/criproxy,
## built once into $(PROBESHIM_CACHE)/critest/<version>.
critest-bin:
	@e2e/critest/build.sh >/dev/null

## rig-up: bring the rig up and leave it running; RIG_NODES=2 for two nodes, ROW=<row> for row 2.
rig-up: deps-rig deps-runc-build
	@env=$$(e2e/rowenv.sh $(or $(ROW),$(firstword $(ROWS)))) && eval "$$env" && \
	PROBESHIM_RIG_NODES=$(RIG_NODES) $(GO) run ./e2e/cmd/rig up

rig-down:
	$(GO) run ./e2e/cmd/rig down

## demo: probeshim end to end on the rig (root): the node service on the node, the cluster part
## deployed from cluster/deploy, the game server example of docs/examples; everything keeps
## running for a look by hand.
demo: deps-rig deps-runc-build
	@env=$$(e2e/rowenv.sh $(or $(ROW),$(firstword $(ROWS)))) && eval "$$env" && $(GO) run ./e2e/cmd/demo up

## demo-down: stop the demo's node service and tear the rig down.
demo-down:
	$(GO) run ./e2e/cmd/demo down

## deps-GROUP: install the Debian packages of one group of internal/build/debpkg/packages.txt (the project's
## one list) that are missing; every target that needs packages depends on its groups. deps: all of them.
deps-%:
	@hack/ensure-packages.sh $*

deps: deps-unit deps-lint deps-nspawn deps-rig deps-runc-build deps-release deps-docs

## fresh-check: what CI sees on a fresh machine, on this one (root; run it before every stop): purge
## every package of the list that a fresh machine lacks, empty $(PROBESHIM_CACHE), then run .ci/run on
## a clean clone of HEAD. FRESH_KEEP_CACHE=1 keeps the cache (the Kubernetes binaries, the rootfs);
## FRESH_EMPTY_GO=1 also empties Go's build and module caches (a truly new machine). It ends with the
## whole check's time.
fresh-check:
	hack/fresh-check.sh

vet:
	$(GO) vet $(UNIT_PKGS) $(PACKAGE_TEST_PKGS)

## lint: golangci-lint with .golangci.yml, over every package (tests and e2e too). Results are cached in
## ~/.cache/golangci-lint, so a second run only looks at what changed.
lint:
	@$(GOLANGCI_LINT) run $(LINT_FLAGS) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')
