#!/usr/bin/env bash
# Builds the container runtime the test rig runs, from the Go module proxy, into
# a cache folder outside the repository keyed by version, and prints the folder.
#   build.sh v2     containerd 2.x (containerd, containerd-shim-runc-v2, ctr)  row 1
#   build.sh v1     containerd 1.7 (the same binaries)                         row 2
#   build.sh runc   runc, with seccomp through cgo against Debian's libseccomp (group runc-build)
# Each module folder (v2/, v1/, runc/) pins its version in its go.mod. A warm
# cache makes this a no-op; a cold one costs a few minutes on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")"
CACHE=${PROBESHIM_CACHE:-/var/cache/probeshim}

build() { # out name package tags cgo ldflags
	local out=$1 name=$2 pkg=$3 tags=$4 cgo=$5 ldflags=$6
	[[ -x "$out/$name" ]] && return 0
	# One build of a folder at a time: rows and colleagues share the cache.
	exec 9>"$out/.lock"
	flock 9
	[[ -x "$out/$name" ]] && return 0
	echo "building $name ($pkg)" >&2
	CGO_ENABLED=$cgo go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg"
	mv "$out/$name.tmp" "$out/$name"
}

case ${1:-} in
v1 | v2)
	cd "$1"
	if [[ $1 == v2 ]]; then mod=github.com/containerd/containerd/v2; else mod=github.com/containerd/containerd; fi
	version=$(go list -m -f '{{.Version}}' "$mod")
	out=${CACHE}/containerd/${version}
	mkdir -p "$out"
	ldflags="-s -w -X ${mod}/version.Version=${version} -X ${mod}/version.Revision=module-proxy"
	ldflags+=" -X ${mod}/version.Package=${mod}"
	# Pure Go like the release's static shim; no_btrfs: the rig's snapshotter is overlayfs.
	for b in containerd containerd-shim-runc-v2 ctr; do
		build "$out" "$b" "$mod/cmd/$b" "no_btrfs urfave_cli_no_docs" 0 "$ldflags"
	done
	;;
runc)
	cd runc
	version=$(go list -m -f '{{.Version}}' github.com/opencontainers/runc)
	seccomp=$(pkg-config --modversion libseccomp 2>/dev/null) || {
		echo "build.sh: libseccomp's headers are missing: hack/ensure-packages.sh runc-build" >&2
		exit 1
	}
	out=${CACHE}/runc/${version}-libseccomp-${seccomp}
	mkdir -p "$out"
	build "$out" runc github.com/opencontainers/runc "seccomp urfave_cli_no_docs" 1 \
		"-X main.version=${version#v} -X main.gitCommit=module-proxy"
	;;
*)
	echo "usage: $0 v1|v2|runc" >&2
	exit 2
	;;
esac
echo "$out"
