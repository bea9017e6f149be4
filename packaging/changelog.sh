#!/usr/bin/env bash
# Prints the package changelog for nfpm (chglog's YAML, newest entry first) from git:
#   - one entry per release tag reachable from HEAD (v1.2.3, v1.2.3-rc.1, versioned as
#     packaging/version.sh does), listing the subjects of the commits since the tag before it;
#   - for a build that is not a tag's, an entry for VERSION listing the subjects since the last tag.
# At most 50 subjects an entry, then how many more. Dates are commits' (the VERSION entry's is
# SOURCE_DATE_EPOCH, else HEAD's), never the clock's: two builds of one commit write one changelog.
# Without the history (not a git checkout, no commit, a shallow clone) it writes one entry for
# VERSION that says so.
#
# Usage: packaging/changelog.sh VERSION deb|rpm
#   deb  each subject cut to Debian's 80 columns ("  * " and 76): nfpm's Debian template turns a
#        note's further lines into "   - " items, so a wrapped subject would read as sub-items.
#   rpm  each subject whole, wrapped to fit 80 columns, continued two spaces in.
#
# Not goreleaser's chglog tool (in the module cache as nfpm's dependency): `chglog add` dates the new
# entry with the clock, its notes are whole commit messages without a bound, and `chglog init`
# leaves pre-release tags out, whose packages version.sh does build.
set -euo pipefail
version=${1:?usage: changelog.sh VERSION deb|rpm}
format=${2:?usage: changelog.sh VERSION deb|rpm}
cd "$(dirname "$0")/.."
# Cut and wrap by characters, not bytes (a cut inside a UTF-8 sequence would be invalid text).
export LC_ALL=C.UTF-8 TZ=UTC

readonly max_subjects=50
readonly packager="probeshim developers <probeshim@users.noreply.github.com>"

# yaml_string prints its argument as a YAML double-quoted string.
yaml_string() {
	local s=${1//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	printf '"%s"' "$s"
}

# note prints one change: a subject fitted to the format.
note() {
	local s
	# Tabs become spaces; other control characters have no place in a changelog.
	s=$(printf '%s' "$1" | tr '\t' ' ' | tr -d '\000-\037\177')
	case $format in
	deb)
		if ((${#s} > 76)); then
			# At a word's end where there is one, then " ...": at most 76 characters.
			local cut=${s:0:72}
			if [[ $cut == *" "* && ${s:72:1} != " " ]]; then cut=${cut% *}; fi
			s="${cut% } ..."
		fi
		;;
	rpm)
		local words word line="" out=""
		read -ra words <<<"$s"
		for word in "${words[@]}"; do
			if [[ -z $line ]]; then
				line=$word
			elif ((${#line} + 1 + ${#word} <= 76)); then
				line+=" $word"
			else
				out+="$line"$'\n'"  "
				line=$word
			fi
		done
		s="$out$line"
		;;
	esac
	printf '    - note: %s\n' "$(yaml_string "$s")"
}

# entry VERSION DATE NOTE... prints one entry (its notes already formatted by note).
entry() {
	printf -- '- semver: %s\n  date: "%s"\n  packager: %s\n' "$(yaml_string "$1-1")" "$2" "$(yaml_string "$packager")"
	printf '  deb:\n    urgency: medium\n    distributions: [stable]\n  changes:\n'
	shift 2
	printf '%s\n' "$@"
}

# subjects RANGE NONE prints the notes of the commits in a git range (merges left out), bounded;
# NONE when there are none.
subjects() {
	local n s
	n=$(git rev-list --no-merges --count "$1")
	while IFS= read -r s; do
		note "$s"
	done < <(git log --no-merges --format=%s -n "$max_subjects" "$1")
	if ((n > max_subjects)); then
		note "... and $((n - max_subjects)) earlier commits: see the probeshim repository."
	fi
	if ((n == 0)); then note "$2"; fi
}

commit_date() { git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ "$1"; }

# tag_version maps a release tag to its package version as packaging/version.sh does; empty for a
# tag that names no release.
tag_version() {
	if [[ $1 =~ ^v([0-9][0-9A-Za-z.]*)$ ]]; then
		echo "${BASH_REMATCH[1]}"
	elif [[ $1 =~ ^v([0-9][0-9A-Za-z.]*)-([A-Za-z][0-9A-Za-z.]*)$ ]]; then
		echo "${BASH_REMATCH[1]}~${BASH_REMATCH[2]}"
	fi
}

if [[ -n ${SOURCE_DATE_EPOCH:-} ]]; then
	date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
elif git rev-parse -q --verify HEAD >/dev/null 2>&1; then
	date=$(commit_date HEAD)
else
	date=1970-01-01T00:00:00Z
fi

if ! git rev-parse -q --verify HEAD >/dev/null 2>&1; then
	entry "$version" "$date" "$(note "Built outside a git checkout: no history to list here.")"
	exit 0
fi
if [[ $(git rev-parse --is-shallow-repository) == true ]]; then
	entry "$version" "$date" "$(note "Built from a shallow clone: only its newest commit is listed here.")" \
		"$(note "$(git log -1 --format=%s HEAD)")"
	exit 0
fi

# Release tags reachable from HEAD, newest version first (a pre-release before its release).
tags=()
while IFS= read -r t; do
	[[ -n $(tag_version "$t") ]] && tags+=("$t")
done < <(git -c versionsort.suffix=- tag --merged HEAD --list 'v[0-9]*' --sort=-v:refname)

# The entry of this build, unless it is the newest tag's own.
if ((${#tags[@]} == 0)) || [[ $version != "$(tag_version "${tags[0]}")" ]]; then
	notes=()
	if [[ $version == *.dirty ]]; then notes+=("$(note "Built with uncommitted changes.")"); fi
	if ((${#tags[@]} == 0)); then
		notes+=("$(subjects HEAD "No commits.")")
	else
		notes+=("$(subjects "${tags[0]}..HEAD" "No commits since ${tags[0]}.")")
	fi
	entry "$version" "$date" "${notes[@]}"
fi
for i in "${!tags[@]}"; do
	range=${tags[i]} none="No commits."
	if ((i + 1 < ${#tags[@]})); then range="${tags[i + 1]}..${tags[i]}" none="The commit of ${tags[i + 1]}, released."; fi
	entry "$(tag_version "${tags[i]}")" "$(commit_date "${tags[i]}^{commit}")" "$(subjects "$range" "$none")"
done
