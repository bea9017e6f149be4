// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Leftovers lists what of a rig with this config is still on the machine:
// processes (in its cgroups, or whose command line names its folder; not
// merely its binaries, which envtest users run too), cgroups, mounts, the netns, its folder and state file, the
// kubelet's socket, and the kubelet's kernel settings. Empty after a clean
// teardown.
func Leftovers(cfg Config) []string {
	cfg = cfg.withDefaults()
	var out []string
	if cg, err := newCgroups(cfg.Cgroup); err == nil {
		if pids := cg.pids(); len(pids) > 0 {
			out = append(out, fmt.Sprintf("processes in cgroup %s: %v", cfg.Cgroup, pids))
		}
		for _, h := range cg.hierarchies {
			if _, err := os.Stat(filepath.Join(h, cfg.Cgroup)); err == nil {
				out = append(out, "cgroup "+filepath.Join(h, cfg.Cgroup))
			}
		}
	}
	if procs := processesNaming(cfg.Dir); len(procs) > 0 {
		out = append(out, "processes: "+strings.Join(procs, ", "))
	}
	if m, _ := mountsUnder(cfg.Dir); len(m) > 0 {
		out = append(out, "mounts: "+strings.Join(m, " "))
	}
	paths := []string{filepath.Join(netnsDir, cfg.NetNS), cfg.Dir, statePath(cfg.Dir)}
	// The kubelet's socket and kernel settings are another live rig's too, until it goes.
	alone := len(otherLiveRigs(cfg.Dir)) == 0
	if alone {
		paths = append(paths, "/var/lib/kubelet/device-plugins/kubelet.sock")
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			out = append(out, p)
		}
	}
	for _, s := range kubeletSysctls {
		if !alone {
			break
		}
		if s.kubelet == s.kernelDefault || s.name == "vm/panic_on_oom" {
			continue
		}
		if b, err := os.ReadFile("/proc/sys/" + s.name); err == nil && strings.TrimSpace(string(b)) == s.kubelet {
			out = append(out, fmt.Sprintf("sysctl %s=%s (the kubelet's value)", s.name, s.kubelet))
		}
	}
	return out
}

// processesNaming lists live processes whose command line contains one of
// the given paths, or a path below one, as "pid name". Not a mere prefix:
// /var/lib/probeshim-rig is not /var/lib/probeshim-rig-node, a rig beside it.
func processesNaming(paths ...string) []string {
	var needles [][]byte
	for _, p := range paths {
		if p != "" {
			p = filepath.Clean(p)
			needles = append(needles, []byte(p+"/"), []byte(p+"\x00"))
		}
	}
	entries, _ := os.ReadDir("/proc")
	var out []string
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue // gone, or a zombie
		}
		for _, n := range needles {
			if bytes.Contains(cmdline, n) {
				name := string(bytes.SplitN(cmdline, []byte{0}, 2)[0])
				out = append(out, fmt.Sprintf("%d %s", pid, filepath.Base(name)))
				break
			}
		}
	}
	return out
}
