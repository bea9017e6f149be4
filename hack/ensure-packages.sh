#!/usr/bin/env bash
# Installs the Debian packages of the given groups that are missing (the list and its groups:
# internal/build/debpkg/packages.txt, the project's one list). Every make target calls it for what it uses.
#   hack/ensure-packages.sh GROUP...          install what is missing (root), or say how (not root)
#   hack/ensure-packages.sh --list GROUP...   print the packages of the groups
#   hack/ensure-packages.sh --non-base        print every package that is not in group base
#   hack/ensure-packages.sh --table           print every package and its groups (NAME GROUP,GROUP)
# It is the one reader of the list: Go code installs through it too (internal/build/debpkg).
set -euo pipefail
list="$(cd "$(dirname "$0")/.." && pwd)/internal/build/debpkg/packages.txt"

# packages GROUP... : names whose groups column holds any of the groups, in the list's order.
packages() {
	awk -v want="$*" 'BEGIN { n = split(want, w, " ") }
		/^[[:space:]]*#/ || NF < 2 { next }
		{ m = split($2, g, ","); hit = 0
		  for (i = 1; i <= m; i++) for (j = 1; j <= n; j++) if (g[i] == w[j]) hit = 1
		  if (hit) print $1 }' "$list"
}

case ${1:-} in
"") echo "usage: $0 [--list] GROUP... | --non-base" >&2; exit 2 ;;
--list) shift; packages "$@"; exit 0 ;;
--table) awk '/^[[:space:]]*#/ || NF < 2 { next } { print $1, $2 }' "$list"; exit 0 ;;
--non-base)
	awk '/^[[:space:]]*#/ || NF < 2 { next } { if ((","$2",") !~ /,base,/) print $1 }' "$list"
	exit 0 ;;
esac

mapfile -t want < <(packages "$@")
if ! command -v dpkg-query >/dev/null; then
	echo "ensure-packages: not a Debian system; make sure these are installed: ${want[*]}" >&2
	exit 0
fi
if [[ ${#want[@]} -eq 0 ]]; then echo "ensure-packages: no packages in groups: $* (see $list)" >&2; exit 2; fi
missing=()
for p in "${want[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $status == *" installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) != 0 ]]; then
	echo "missing Debian packages for $*: ${missing[*]}" >&2
	echo "  install them as root: apt-get install --no-install-recommends ${missing[*]}" >&2
	exit 1
fi
# make test runs stages side by side, and apt-get update does not wait for another's lock: one at a time.
exec 9>/run/lock/probeshim-ensure-packages.lock
flock 9
echo "installing Debian packages for $*: ${missing[*]}" >&2
apt=(apt-get -o DPkg::Lock::Timeout=300 -q)
"${apt[@]}" update >/dev/null
DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
for p in "${missing[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	if [[ $status != *" installed" ]]; then echo "ensure-packages: $p still not installed" >&2; exit 1; fi
done
