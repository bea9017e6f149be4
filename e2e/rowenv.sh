#!/usr/bin/env bash
# Builds what one row of the test matrix runs (what the cache lacks) and prints
# the exports that point the rig at it:
#   eval "$(e2e/rowenv.sh k1.35-c1.7)"
# Rows (docs/install/node.md, "Supported versions"; e2e/rig/row.go names the same):
#   k1.37-c2.4   Kubernetes 1.37 + containerd 2.4 (row 1: every suite)
#   k1.35-c1.7   Kubernetes 1.35 + containerd 1.7 (row 2)
# Both rows run runc built from the same pinned source. The builds of one row
# run side by side; their logs go to stderr.
set -euo pipefail
cd "$(dirname "$0")"
case ${1:-} in
k1.37-c2.4) kube=1.37 ctrd=v2 ;;
k1.35-c1.7) kube=1.35 ctrd=v1 ;;
*) echo "usage: $0 k1.37-c2.4|k1.35-c1.7" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kubebin/build.sh "$kube" >"$tmp/kube" & k=$!
containerdbin/build.sh "$ctrd" >"$tmp/ctrd" & c=$!
containerdbin/build.sh runc >"$tmp/runc" & r=$!
rc=0
wait $k || rc=1
wait $c || rc=1
wait $r || rc=1
[[ $rc == 0 ]] || { echo "rowenv: building row $1 failed" >&2; exit 1; }
printf 'export PROBESHIM_ROW=%q PROBESHIM_KUBE_BIN=%q PROBESHIM_CONTAINERD_BIN=%q PROBESHIM_RUNC=%q\n' \
	"$1" "$(cat "$tmp/kube")" "$(cat "$tmp/ctrd")" "$(cat "$tmp/runc")/runc"
