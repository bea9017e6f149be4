#!/usr/bin/env bash
# Lints built packages: lintian for each .deb, rpmlint for each .rpm (with packaging/rpmlint.toml).
# Usage: packaging/lint.sh PACKAGE...   (default: everything in dist/)
# Fails on any lintian error or warning, and on any rpmlint error or warning. Overrides, each with its
# reason, live in packaging/files/lintian-overrides (shipped in the .deb) and packaging/rpmlint.toml.
# Installs its tools (group lint of internal/build/debpkg/packages.txt) when missing and running as root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
pkgs=("$@")
if [[ ${#pkgs[@]} -eq 0 ]]; then pkgs=(dist/*.deb dist/*.rpm); fi

"$here/../hack/ensure-packages.sh" lint

# rpmlint unpacks with `rpm2cpio X | cpio -id`, and nfpm's rpms hold absolute paths (/usr/bin/...):
# as root that would write the package's files into this machine's / . A cpio that refuses absolute
# names, first in PATH, keeps the unpacking inside rpmlint's scratch folder.
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
printf '#!/bin/sh\nexec /usr/bin/cpio --no-absolute-filenames "$@"\n' >"$shim/cpio"
chmod +x "$shim/cpio"

rc=0
for p in "${pkgs[@]}"; do
	case $p in
	*.deb)
		echo "== lintian $p"
		# --fail-on warning: warnings fail the build as errors do; pedantic/info tags are shown.
		lintian --fail-on error,warning --display-info --pedantic --tag-display-limit 0 "$p" 2>&1 |
			grep -v '^running with root privileges' || true
		lintian --fail-on error,warning -q "$p" >/dev/null 2>&1 || rc=1
		;;
	*.rpm)
		echo "== rpmlint $p"
		# Exit status 64 = errors, 66 = badness over threshold; warnings we check by hand.
		out=$(PATH="$shim:$PATH" rpmlint -c packaging/rpmlint.toml "$p" 2>&1) || rc=1
		echo "$out" | grep -E ': [EW]: |errors, ' || true
		if echo "$out" | grep -qE ': W: '; then rc=1; fi
		;;
	esac
done
if [[ $rc != 0 ]]; then echo "lint: FAILED" >&2; else echo "lint: clean"; fi
exit $rc
