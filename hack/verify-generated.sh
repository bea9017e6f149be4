#!/usr/bin/env bash
# Fails when the generated deepcopy code or CRD manifests in apis/, the metrics reference
# docs/metrics.md, the references docs/reference/api.md, node-config.md and cli.md, or the chart's
# README charts/probeshim/README.md, are not what `make generate`
# produces. The code is generated into a scratch copy of the module and the documents in memory, so
# the working tree is never touched (safe to run while others edit it, and on a read-only checkout).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

cd "$root"
mkdir -p "$tmp/hack/tools"
cp go.mod go.sum "$tmp/"
cp hack/boilerplate.go.txt "$tmp/hack/"
cp hack/tools/go.mod hack/tools/go.sum "$tmp/hack/tools/"
cp -a apis "$tmp/apis"
mkdir -p "$tmp/cluster/internal"
cp -a cluster/internal/kruiseapi "$tmp/cluster/internal/kruiseapi"
# Start from no generated files, so a leftover that nothing generates any more counts as stale too.
find "$tmp/apis" "$tmp/cluster/internal/kruiseapi" -name 'zz_generated.*.go' -delete
rm -f "$tmp/apis/crds/"*.yaml

make -s -C "$tmp" -f "$root/Makefile" generate-code >/dev/null

if ! (cd "$tmp" && diff -ru "$root/apis" apis && diff -ru "$root/cluster/internal/kruiseapi" cluster/internal/kruiseapi) >"$tmp/diff"; then
	cat "$tmp/diff" >&2
	echo "generated code in apis/ or cluster/internal/kruiseapi/ is stale: run 'make generate' and commit the result" >&2
	exit 1
fi

# They say which lines differ and to run `make generate`.
go run ./hack/metricsdoc -check
go run ./hack/chartdoc -check
go run ./hack/apidoc -check
go run ./hack/configdoc -check
go run ./hack/clidoc -check
