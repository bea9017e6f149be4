#!/usr/bin/env bash
# Builds critest (the CRI validation suite of sigs.k8s.io/cri-tools, a Go test
# binary) and the ginkgo CLI it runs parallel nodes with, from the Go module
# proxy, into a cache folder outside the repository keyed by version; prints
# the folder. A warm cache makes this a no-op; a cold one takes a minute or two.
set -euo pipefail
cd "$(dirname "$0")"

CRI_TOOLS_VERSION=$(go list -m -f '{{.Version}}' sigs.k8s.io/cri-tools)
GINKGO_VERSION=$(go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
CACHE=${PROBESHIM_CACHE:-/var/cache/probeshim}
OUT=${CACHE}/critest/${CRI_TOOLS_VERSION}-ginkgo-${GINKGO_VERSION}

if [[ -x "$OUT/critest" && -x "$OUT/ginkgo" ]]; then echo "$OUT"; exit 0; fi
mkdir -p "$OUT"
if [[ ! -x "$OUT/critest" ]]; then
	echo "building critest ${CRI_TOOLS_VERSION}" >&2
	CGO_ENABLED=0 go test -c -trimpath \
		-ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRI_TOOLS_VERSION}" \
		-o "$OUT/critest.tmp" sigs.k8s.io/cri-tools/cmd/critest
	mv "$OUT/critest.tmp" "$OUT/critest"
fi
if [[ ! -x "$OUT/ginkgo" ]]; then
	echo "building ginkgo ${GINKGO_VERSION}" >&2
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT/ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo
	mv "$OUT/ginkgo.tmp" "$OUT/ginkgo"
fi
echo "$OUT"
