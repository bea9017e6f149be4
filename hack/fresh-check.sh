#!/usr/bin/env bash
# Runs CI as a fresh machine would, on this one: CI runs on the developer's machine, where whatever an
# earlier session installed hides a missing install step. So first put the machine back to what a fresh
# one has — purge every Debian package of internal/build/debpkg/packages.txt outside group "base" (and what
# they pulled in), stop any rig, empty the project's cache — then run .ci/run on a clean clone of HEAD.
# Root only; it changes this machine's packages. Run it before every stop (CONTRIBUTING.md).
#   FRESH_KEEP_CACHE=1   keep $PROBESHIM_CACHE (Kubernetes binaries, rootfs): checks packages only, faster
#   FRESH_EMPTY_GO=1     also empty Go's build and module caches and golangci-lint's (a truly new machine;
#                        the budget: the whole check within 45 minutes on 2 cores)
#   FRESH_LOG=FILE       where .ci/run's output goes (default /tmp/probeshim-fresh-check.log)
set -euo pipefail
check_start=$SECONDS
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${PROBESHIM_CACHE:-/var/cache/probeshim}
log=${FRESH_LOG:-/tmp/probeshim-fresh-check.log}
export PATH=/usr/local/go/bin:$PATH
if [[ $(id -u) != 0 ]]; then echo "fresh-check: needs root (it purges and reinstalls packages)" >&2; exit 1; fi

echo "== stopping any rig or demo"
(cd "$repo" && make -s rig-down >/dev/null 2>&1) || true

echo "== purging the project's packages a fresh machine does not have"
mapfile -t nonbase < <("$repo/hack/ensure-packages.sh" --non-base)
# Packages the list once had: a fresh machine lacks them too (Debian's containerd and runc, replaced by
# the pinned builds of e2e/containerdbin).
nonbase+=(containerd runc)
installed=()
for p in "${nonbase[@]}"; do
	if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == *" installed" ]]; then installed+=("$p"); fi
done
if [[ ${#installed[@]} -gt 0 ]]; then
	echo "   ${installed[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -q -y purge --autoremove "${installed[@]}" >/dev/null
fi
left=()
for p in "${nonbase[@]}"; do
	if [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == *" installed" ]]; then left+=("$p"); fi
done
if [[ ${#left[@]} -gt 0 ]]; then echo "fresh-check: still installed after the purge: ${left[*]}" >&2; exit 1; fi
for tool in rpm rpmlint lintian containerd runc systemd-nspawn mmdebstrap; do
	if command -v "$tool" >/dev/null; then echo "fresh-check: $tool is still on PATH ($(command -v "$tool"))" >&2; exit 1; fi
done

if [[ ${FRESH_KEEP_CACHE:-} != 1 ]]; then
	echo "== emptying $cache"
	rm -rf "$cache"
fi

if [[ ${FRESH_EMPTY_GO:-} == 1 ]]; then
	echo "== emptying Go's build and module caches and golangci-lint's"
	go clean -cache -modcache
	rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/golangci-lint"
fi

work=$(mktemp -d /tmp/probeshim-fresh.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "== .ci/run on a clean clone of $(git -C "$repo" rev-parse --short HEAD) in $work (log: $log)"
git clone -q --no-local "$repo" "$work/probeshim"
start=$SECONDS
rc=0
(cd "$work/probeshim" && CI=true bash .ci/run </dev/null) >"$log" 2>&1 || rc=$?
echo "== .ci/run exited $rc after $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s; its last lines:"
tail -n 30 "$log"
# The documented targets CI does not run, on the same clean clone.
for target in image; do
	echo "== make $target"
	if ! (cd "$work/probeshim" && make -s "$target" </dev/null) >>"$log" 2>&1; then
		echo "fresh-check: make $target failed; see $log" >&2
		rc=1
	fi
done
total=$((SECONDS - check_start))
echo "== fresh-check exited $rc after $((total / 60))m$((total % 60))s in all (caches: $([[ ${FRESH_KEEP_CACHE:-} == 1 ]] && echo "kept $cache" || echo "emptied $cache")$([[ ${FRESH_EMPTY_GO:-} == 1 ]] && echo ", Go's emptied" || echo ", Go's kept"))"
exit $rc
