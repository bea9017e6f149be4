#!/usr/bin/env bash
# Prints the path of promtool for the alert tests (or, with the argument prometheus, of the
# Prometheus server the e2e suites run in the rig), unpacked from Debian's prometheus package into
# $PROBESHIM_CACHE/promtool/<version> once. Not installed: the package would also enable and start a
# Prometheus server on the machine. Not built from the module proxy: promtool links Prometheus's
# every service discovery, minutes of compiling on a 2-core machine for a rule checker.
set -euo pipefail
tool=${1:-promtool}
case $tool in promtool | prometheus) ;; *) echo "usage: $0 [promtool|prometheus]" >&2; exit 2 ;; esac
cache=${PROBESHIM_CACHE:-/var/cache/probeshim}/promtool
candidate() { apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ { print $2 }'; }
ver=$(candidate)
if [[ -z $ver || $ver == "(none)" ]]; then
	[[ $(id -u) == 0 ]] || { echo "promtool: apt knows no prometheus package; as root: apt-get update" >&2; exit 1; }
	exec 9>/run/lock/probeshim-ensure-packages.lock # apt-get update one at a time (hack/ensure-packages.sh)
	flock 9
	apt-get -o DPkg::Lock::Timeout=300 -q update >/dev/null
	ver=$(candidate)
	[[ -n $ver && $ver != "(none)" ]] || { echo "promtool: no prometheus package in the apt sources" >&2; exit 1; }
fi
dir=$cache/${ver//[^A-Za-z0-9.+~-]/_}
if [[ ! -x $dir/promtool || ! -x $dir/prometheus ]]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	chmod 755 "$tmp" # apt's download sandbox user writes here
	(cd "$tmp" && apt-get -q download "prometheus=$ver" >/dev/null 2>&1) || { echo "promtool: apt-get download prometheus=$ver failed" >&2; exit 1; }
	dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool ./usr/bin/prometheus
	mkdir -p "$dir"
	mv "$tmp/usr/bin/promtool" "$tmp/usr/bin/prometheus" "$dir/"
	echo "promtool: unpacked Debian's prometheus $ver into $dir" >&2
fi
echo "$dir/$tool"
