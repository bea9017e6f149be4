#!/usr/bin/env bash
# Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.
#
# Prints the path of cosign (sigstore's signing tool: the release signs its image and chart with it,
# and the e2e suites verify those signatures with it before they install), built once from the
# module proxy at the version hack/tools/cosign/go.mod pins, into $PROBESHIM_CACHE/cosign/<version>.
# Debian 12 has no cosign package; a few minutes of compiling on a 2-core machine the first time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mod=$root/hack/tools/cosign/go.mod
ver=$(awk '$1 == "github.com/sigstore/cosign/v2" { print $2 }' "$mod")
[[ -n $ver ]] || { echo "cosign: no github.com/sigstore/cosign/v2 in $mod" >&2; exit 1; }
dir=${PROBESHIM_CACHE:-/var/cache/probeshim}/cosign/$ver
mkdir -p "$dir"
exec 9>"$dir.lock" # one build at a time: make e2e starts it early, a suite may ask meanwhile
flock 9
if [[ ! -x $dir/cosign ]]; then
	echo "cosign: building $ver into $dir (once)" >&2
	(cd "$root/hack/tools/cosign" && go build -trimpath -o "$dir/cosign.tmp" github.com/sigstore/cosign/v2/cmd/cosign)
	mv "$dir/cosign.tmp" "$dir/cosign"
fi
echo "$dir/cosign"
