#!/usr/bin/env bash
# Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.
#
# Runs the real-containerd tests of shim/runtime and shim/criproxy (TestReal*, and with -bench the
# exec benchmark) against a private containerd, without the rig: no Kubernetes, no rig lock. The
# daemon comes from $PROBESHIM_CONTAINERD_BIN, a folder with containerd and containerd-shim-runc-v2
# (the name the rig uses; e.g. /var/cache/probeshim/containerd/v2.4.2), else from PATH; runc from
# $PROBESHIM_RUNC, else PATH. It runs in a network namespace of its own with the CNI bridge, its root
# and state in a temporary folder; everything is removed afterwards. Needs root, busybox-static and
# the CNI plugins in /usr/lib/cni. Arguments go to go test, e.g.
#   PROBESHIM_CONTAINERD_BIN=/var/cache/probeshim/containerd/v2.4.2 hack/realruntime.sh -run TestRealExec
# REALRUNTIME_PKGS narrows the packages (one package for -cpuprofile), e.g. REALRUNTIME_PKGS=./shim/runtime/.
set -euo pipefail

if [[ ${1:-} == __ctl ]]; then # __ctl DIR stop|start: PROBESHIM_CONTAINERD_CTL of the reconnect test
	dir=$2
	# shellcheck disable=SC1091
	. "$dir/env"
	case $3 in
	stop)
		pid=$(cat "$dir/pid")
		kill -TERM "$pid"
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
		echo "containerd $pid did not stop" >&2
		exit 1
		;;
	start)
		nsenter --net="/run/netns/$NETNS" -- env PATH="$DAEMON_PATH" containerd --config "$dir/config.toml" \
			>>"$dir/containerd.log" 2>&1 &
		echo $! >"$dir/pid"
		for _ in $(seq 300); do
			ctr --address "$dir/containerd.sock" version >/dev/null 2>&1 && exit 0
			sleep 0.1
		done
		echo "containerd did not come up; see $dir/containerd.log" >&2
		exit 1
		;;
	esac
	exit 2
fi

[[ $(id -u) == 0 ]] || { echo "realruntime.sh: needs root" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)
self=$root/hack/realruntime.sh
bin=${PROBESHIM_CONTAINERD_BIN:-$(dirname "$(command -v containerd)")}
for b in containerd containerd-shim-runc-v2; do
	[[ -x $bin/$b ]] || { echo "realruntime.sh: $bin/$b missing (PROBESHIM_CONTAINERD_BIN)" >&2; exit 1; }
done
runc=${PROBESHIM_RUNC:-$(command -v runc || true)}
[[ -x $runc ]] || { echo "realruntime.sh: no runc (PROBESHIM_RUNC, or runc on PATH)" >&2; exit 1; }
dir=$(mktemp -d /tmp/probeshim-rt.XXXXXX)
netns=probeshim-rt-$$
cat >"$dir/env" <<EOF
NETNS=$netns
DAEMON_PATH=$bin:$PATH
PATH=$bin:$PATH
EOF

cleanup() {
	set +e
	"$self" __ctl "$dir" stop 2>/dev/null
	# Shims and containers outlive containerd: end those of this daemon, found by its socket.
	for p in /proc/[0-9]*; do
		if { tr "\0" " " <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$dir/containerd.sock"; then
			kill -KILL "${p#/proc/}" 2>/dev/null
		fi
	done
	sleep 0.5
	awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$m"; done
	ip netns delete "$netns" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

ip netns add "$netns"
ip -n "$netns" link set lo up
mkdir -p "$dir/cni"
cat >"$dir/cni/10-probeshim-rt.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "probeshim-rt-$$", "plugins": [{"type": "bridge", "bridge": "psrt0",
  "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.223.0.0/24"}]],
  "dataDir": "$dir/ipam"}}]}
EOF
# Config format 2: 1.6 and 1.7 read it, 2.x migrates it. The sandbox image is the tests' own.
cat >"$dir/config.toml" <<EOF
version = 2
root = "$dir/root"
state = "$dir/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "probeshim.test/busybox:1"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$runc"
        Root = "$dir/runc"
EOF
"$self" __ctl "$dir" start
echo "realruntime.sh: $("$bin/containerd" --version), $("$runc" --version | head -1) at $dir" >&2
cd "$root"
PROBESHIM_CONTAINERD_SOCKET="$dir/containerd.sock" PROBESHIM_CONTAINERD_CTL="$self __ctl $dir" \
	go test -count=1 -v -run '^TestReal' "$@" ${REALRUNTIME_PKGS:-./shim/runtime/ ./shim/criproxy/} || {
	rc=$?
	tail -n 30 "$dir/containerd.log" >&2
	exit $rc
}
