#!/usr/bin/env bash
# Regenerates deepcopy code and CRD manifests into a scratch copy and fails when
# they differ from what is checked in.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -a apis "$tmp/apis.before"
make -s generate >/dev/null
if ! diff -r "$tmp/apis.before" apis >"$tmp/diff"; then
	cat "$tmp/diff" >&2
	rm -rf apis && cp -a "$tmp/apis.before" apis
	echo "generated code in apis/ is stale: run 'make generate' and commit the result" >&2
	exit 1
fi
