# probeshim — build and test entry points. `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
# Packages whose tests are fast and need nothing but Go (no root, no rig).
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e '/e2e' -e '/packaging$$')
# The package tests: build the .deb and .rpm, boot systemd containers (root, about a minute).
PACKAGE_TEST_PKGS = ./packaging
PACKAGE_TEST_TIMEOUT ?= 20m
# Real-component suites: each package is one test binary that brings up one rig.
E2E_PKGS ?= ./e2e/...
E2E_TIMEOUT ?= 60m
export PROBESHIM_CACHE ?= /var/cache/probeshim

.PHONY: all build unit test e2e bench generate verify-generated kube-bins critest-bin rig-up rig-down fmt vet clean \
	packages package-test demo demo-down

all: build

build:
	$(GO) build ./...

## unit: fast tests (seconds) plus the check that generated code is current.
unit: verify-generated vet
	$(GO) test -count=1 $(UNIT_PKGS)

## test: everything CI runs — unit tests, the package tests and the real-component suites.
test: kube-bins critest-bin unit package-test e2e

## packages: the .deb and .rpm of the node service in dist/ (nfpm; version from git), linted.
packages:
	@pkgs=$$(packaging/build.sh) && packaging/lint.sh $$pkgs && echo "$$pkgs"

## package-test: install/upgrade/remove/purge both packages on a real systemd (systemd-nspawn);
## needs root (skips with a message otherwise).
package-test:
	$(GO) test -count=1 -v -timeout $(PACKAGE_TEST_TIMEOUT) $(PACKAGE_TEST_PKGS)

## e2e: real kube-apiserver, kubelet, containerd; needs root (skips with a message otherwise).
e2e: kube-bins critest-bin
	@if [ "$$(id -u)" != 0 ]; then echo "e2e: skipped, the real-component suites need root"; exit 0; fi; \
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) PROBESHIM_CRITEST_BIN=$$(e2e/critest/build.sh) $(GO) test -count=1 -timeout $(E2E_TIMEOUT) -p 1 $(E2E_PKGS)

## bench: benchmarks that print numbers: the engine and handlers alone, then (as root) the node
## service on the rig — probe cost side by side with the kubelet, 100 pods at scale, exec and netns
## dial ratios against a real containerd, CRI latency through the proxy vs containerd directly — and
## the liveness decider's reaction (status Failed to request to kill, p50/p99). In between, the
## decider at scale on a real API server (envtest, no root): 5,000 nodes x 20 liveness probes with 1%
## failing — decision latency, CPU, memory; about 10 minutes.
bench:
	$(GO) test -run '^$$' -bench . -skip '^BenchmarkDeciderScale$$' -benchtime 1x $(UNIT_PKGS)
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) $(GO) test -count=1 -run '^$$' -bench '^BenchmarkDeciderScale$$' \
		-benchtime 1x -timeout 40m ./cluster/decider/
	@if [ "$$(id -u)" != 0 ]; then echo "bench: rig benchmarks skipped, they need root"; exit 0; fi; \
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m -p 1 \
		./e2e/node/ ./e2e/criproxy/ ./e2e/decider/

generate:
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./apis/...
	$(TOOLS) controller-gen crd:crdVersions=v1 paths=./apis/... output:crd:artifacts:config=apis/crds

## verify-generated: fails when deepcopy or CRD manifests are stale.
verify-generated:
	@hack/verify-generated.sh

kube-bins:
	@e2e/kubebin/build.sh >/dev/null

## critest-bin: critest (CRI validation suite, sigs.k8s.io/cri-tools) and ginkgo for e2e/criproxy,
## built once into $(PROBESHIM_CACHE)/critest/<version>.
critest-bin:
	@e2e/critest/build.sh >/dev/null

rig-up: kube-bins
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) $(GO) run ./e2e/cmd/rig up

rig-down:
	$(GO) run ./e2e/cmd/rig down

## demo: probeshim end to end on the rig (root): the node service on the node, the cluster part
## deployed from cluster/deploy, the game server example of docs/examples; everything keeps
## running for a look by hand.
demo: kube-bins
	PROBESHIM_KUBE_BIN=$$(e2e/kubebin/build.sh) $(GO) run ./e2e/cmd/demo up

## demo-down: stop the demo's node service and tear the rig down.
demo-down:
	$(GO) run ./e2e/cmd/demo down

vet:
	$(GO) vet $(UNIT_PKGS) $(PACKAGE_TEST_PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')
