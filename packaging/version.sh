#!/usr/bin/env bash
# Prints the package version of the checked-out tree, valid for both dpkg and rpm and ordered the same
# way by both:
#   tag v1.2.3, clean             -> 1.2.3
#   3 commits after v1.2.3        -> 1.2.3+git20261129101500.3.abc1234   (after 1.2.3)
#   no tag yet                    -> 0.0.0~git20261129101500.abc1234     (before any 0.0.0 release)
#   uncommitted changes           -> the above plus .dirty               (after the same commit, clean)
#   no commit at all              -> 0.0.0~git00000000000000.uncommitted
# The date is the commit's (UTC), not the build's: two builds of one commit get one version, and
# snapshots sort in commit order. PROBESHIM_VERSION, when set, is printed as it is.
set -euo pipefail
if [[ -n "${PROBESHIM_VERSION:-}" ]]; then echo "$PROBESHIM_VERSION"; exit 0; fi
cd "$(dirname "$0")/.."

if ! git rev-parse -q --verify HEAD >/dev/null 2>&1; then
	echo "0.0.0~git00000000000000.uncommitted"
	exit 0
fi
desc=$(git describe --tags --always --dirty --abbrev=7 --match 'v[0-9]*')
date=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)
dirty=""
if [[ $desc == *-dirty ]]; then dirty=".dirty"; desc=${desc%-dirty}; fi

if [[ $desc =~ ^v([0-9][0-9A-Za-z.]*)-([0-9]+)-g([0-9a-f]+)$ ]]; then
	echo "${BASH_REMATCH[1]}+git${date}.${BASH_REMATCH[2]}.${BASH_REMATCH[3]}${dirty}"
elif [[ $desc =~ ^v([0-9][0-9A-Za-z.]*)$ ]]; then
	# A tag such as v1.2.3 (a pre-release tag v1.2.3-rc.1 becomes 1.2.3~rc.1 below).
	if [[ -n $dirty ]]; then echo "${BASH_REMATCH[1]}+git${date}${dirty}"; else echo "${BASH_REMATCH[1]}"; fi
elif [[ $desc =~ ^v([0-9][0-9A-Za-z.]*)-([A-Za-z][0-9A-Za-z.]*)(-([0-9]+)-g([0-9a-f]+))?$ ]]; then
	v="${BASH_REMATCH[1]}~${BASH_REMATCH[2]}"
	if [[ -n ${BASH_REMATCH[3]} ]]; then v+="+git${date}.${BASH_REMATCH[4]}.${BASH_REMATCH[5]}"; fi
	echo "${v}${dirty}"
else
	# No tag: describe printed the abbreviated commit.
	echo "0.0.0~git${date}.${desc}${dirty}"
fi
