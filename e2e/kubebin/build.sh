#!/usr/bin/env bash
# Builds the Kubernetes and etcd binaries the test rig runs, from the Go module
# proxy, into a cache folder outside the repository keyed by version. A warm
# cache makes this a no-op; a cold one costs about 9 minutes and 4 GB of Go
# build cache on a 2-core machine.
#   build.sh          Kubernetes 1.37 (this folder's go.mod pins the patch)   row 1
#   build.sh 1.35     Kubernetes 1.35 (v1.35/go.mod)                          row 2
#   build.sh 1.37 kube-apiserver etcd   only those (what envtest needs), the others later
set -euo pipefail
cd "$(dirname "$0")"
case ${1:-1.37} in
1.37) ;;
1.35) cd v1.35 ;;
*) echo "usage: $0 [1.37|1.35] [binary...]" >&2; exit 2 ;;
esac

KUBE_VERSION=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
ETCD_VERSION=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
CACHE=${PROBESHIM_CACHE:-/var/cache/probeshim}
OUT=${CACHE}/kube/${KUBE_VERSION}-etcd-${ETCD_VERSION}
BINS=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl etcd)
if [[ $# -gt 1 ]]; then
	shift
	for b in "$@"; do
		[[ " ${BINS[*]} " == *" $b "* ]] || { echo "build.sh: no binary $b (${BINS[*]})" >&2; exit 2; }
	done
	BINS=("$@")
fi

have_all() { for b in "${BINS[@]}"; do [[ -x "$OUT/$b" ]] || return 1; done; }
if have_all; then echo "$OUT"; exit 0; fi
mkdir -p "$OUT"

minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
	ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

build() { # name package
	[[ -x "$OUT/$1" ]] && return 0
	exec 9>"$OUT/.lock" # one build of a folder at a time: rows and colleagues share the cache
	flock 9
	[[ -x "$OUT/$1" ]] && return 0
	echo "building $1 ($2)" >&2
	CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$OUT/$1.tmp" "$2"
	mv "$OUT/$1.tmp" "$OUT/$1"
}
for b in "${BINS[@]}"; do
	case $b in
	etcd) build etcd go.etcd.io/etcd/server/v3 ;;
	*) build "$b" "k8s.io/kubernetes/cmd/$b" ;;
	esac
done
echo "$OUT"
