#!/usr/bin/env bash
# Builds the probeshim .deb and .rpm from packaging/nfpm.yaml into dist/ (or $PROBESHIM_DIST).
#   PROBESHIM_VERSION  package version (default: packaging/version.sh, from git)
#   PROBESHIM_BINARY   package this binary instead of building ./shim/cmd/probeshim (tests only; one
#                      architecture, the binary's)
#   PROBESHIM_DIST     output folder (default: dist)
#   PROBESHIM_FORMATS  "deb rpm" (default) or one of them
#   PROBESHIM_ARCHES   Go architectures to build for: "amd64 arm64" (default) or one of them
#   PROBESHIM_CONFIG   ship this file as the default /etc/probeshim/config.yaml (tests: a newer default)
# Prints the paths of the packages it wrote, one a line.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

version=$(packaging/version.sh)
dist=${PROBESHIM_DIST:-dist}
formats=${PROBESHIM_FORMATS:-deb rpm}
arches=${PROBESHIM_ARCHES:-amd64 arm64}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Reproducible: every timestamp in the packages is the commit's.
if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
fi
export SOURCE_DATE_EPOCH

if [[ ! -d shim/cmd/probeshim && -z ${PROBESHIM_BINARY:-} ]]; then
	echo "packaging: ./shim/cmd/probeshim does not exist yet; nothing to package" >&2
	exit 1
fi
if [[ -n ${PROBESHIM_BINARY:-} && $arches == *" "* ]]; then
	echo "packaging: PROBESHIM_BINARY is one architecture's binary; set PROBESHIM_ARCHES to it" >&2
	exit 1
fi

gzip -9n <packaging/files/probeshim.8 >"$stage/probeshim.8.gz"
install -m 0644 "${PROBESHIM_CONFIG:-packaging/files/config.yaml}" "$stage/config.yaml"

# The changelog from git, one for each format (packaging/changelog.sh); nfpm writes it as
# changelog.Debian.gz and as the rpm's %changelog.
for f in $formats; do
	packaging/changelog.sh "$version" "$f" >"$stage/changelog-$f.yaml"
done

mkdir -p "$dist"
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
commit_date=$(git log -1 --format=%cI 2>/dev/null || echo unknown)
# Static (CGO_ENABLED=0): the same binaries run on every distribution the packages target, and
# cross-compile to every architecture without a C toolchain for it.
build() { # arch output package
	CGO_ENABLED=0 GOOS=linux GOARCH=$1 $GO build -trimpath \
		-ldflags "-s -w -X main.version=${version} -X github.com/probeshim/probeshim/internal/version.commit=${commit} -X github.com/probeshim/probeshim/internal/version.commitDate=${commit_date}" \
		-o "$2" "$3"
}
for arch in $arches; do
	mkdir -p "$stage/$arch"
	if [[ -n ${PROBESHIM_BINARY:-} ]]; then
		install -m 0755 "$PROBESHIM_BINARY" "$stage/$arch/probeshim"
	else
		build "$arch" "$stage/$arch/probeshim" ./shim/cmd/probeshim
	fi
	build "$arch" "$stage/$arch/probeshim-metrics" ./shim/cmd/probeshim-metrics
	# nfpm.yaml packages ${PROBESHIM_STAGE}/probeshim and probeshim-metrics: this architecture's
	# binaries, for this round.
	install -m 0755 "$stage/$arch/probeshim" "$stage/$arch/probeshim-metrics" "$stage/"
	# nfpm maps Go's names (amd64, arm64) to each format's (amd64/x86_64, arm64/aarch64).
	export PROBESHIM_VERSION=$version PROBESHIM_ARCH=$arch PROBESHIM_STAGE=$stage
	for f in $formats; do
		# nfpm expands ${VAR} in most fields but not in `changelog`: substitute the stage folder
		# and the format (each has its changelog) here.
		sed -e "s|\${PROBESHIM_STAGE}|${stage}|g" -e "s|\${PROBESHIM_FORMAT}|${f}|g" packaging/nfpm.yaml >"$stage/nfpm.yaml"
		# nfpm pinned in hack/tools/go.mod.
		$GO tool -modfile=hack/tools/go.mod nfpm package --config "$stage/nfpm.yaml" \
			--packager "$f" --target "$dist/" >&2
	done
	for f in $formats; do
		case $f in
		deb) ls "$dist/probeshim_${version}-1_${arch}.deb" ;;
		rpm)
			case $arch in
			amd64) rarch=x86_64 ;; arm64) rarch=aarch64 ;; *) rarch=$arch ;;
			esac
			ls "$dist/probeshim-${version}-1.${rarch}.rpm"
			;;
		esac
	done
done
