// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemonCgroup holds the components the rig starts (and so containerd's
// shims); the kubelet's cgroupRoot holds the pods. Both sit under the rig's
// own top-level cgroup in every hierarchy, which is what teardown sweeps.
const (
	daemonCgroup = "daemons"
	podsCgroup   = "pods"
)

// cgroups is the rig's top-level cgroup (e.g. /probeshim-rig) in every mounted
// hierarchy of this cgroup v1 / hybrid machine.
type cgroups struct {
	name        string
	hierarchies []string // mount points, e.g. /sys/fs/cgroup/cpuset
}

func newCgroups(name string) (*cgroups, error) {
	h, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	if len(h) == 0 {
		return nil, errors.New("no cgroup file system is mounted")
	}
	return &cgroups{name: name, hierarchies: h}, nil
}

// cgroupMounts lists the mount points of all cgroup and cgroup2 file systems.
func cgroupMounts() ([]string, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m.point)
		}
	}
	return out, nil
}

// create makes the top-level cgroup and the given children in every
// hierarchy. cpuset needs cpus and mems before a task may join: copy them
// from the parent.
func (c *cgroups) create(children ...string) error {
	for _, h := range c.hierarchies {
		dirs := []string{filepath.Join(h, c.name)}
		for _, ch := range children {
			dirs = append(dirs, filepath.Join(h, c.name, ch))
		}
		for _, d := range dirs {
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if _, err := os.Stat(filepath.Join(d, "cpuset.cpus")); err == nil {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
						return fmt.Errorf("%s/%s: %w", d, f, err)
					}
				}
			}
		}
	}
	return nil
}

// JoinDaemonCgroup moves pid into the cgroup of the rig's own components, as
// the rig does with what it starts: whoever tears the rig down then stops it
// too (e.g. a node service meant to outlive the process that started it).
func (r *Rig) JoinDaemonCgroup(pid int) error { return r.cgroups.add(daemonCgroup, pid) }

// add moves pid into child in every hierarchy.
func (c *cgroups) add(child string, pid int) error {
	for _, h := range c.hierarchies {
		p := filepath.Join(h, c.name, child, "cgroup.procs")
		if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("join %s: %w", p, err)
		}
	}
	return nil
}

// pids lists every process in the rig's cgroup tree of any hierarchy.
func (c *cgroups) pids() []int {
	seen := map[int]bool{}
	for _, h := range c.hierarchies {
		_ = filepath.WalkDir(filepath.Join(h, c.name), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			f, err := os.Open(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			defer f.Close()
			s := bufio.NewScanner(f)
			for s.Scan() {
				if pid, err := strconv.Atoi(strings.TrimSpace(s.Text())); err == nil && pid > 1 {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	return out
}

// killAll SIGKILLs every process in the tree until none is left (processes
// may fork while they are being killed) or the timeout passes.
func (c *cgroups) killAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := c.pids()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still in cgroup %s after %s: %v", c.name, timeout, pids)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remove deletes the tree, deepest first, in every hierarchy. A cgroup only
// goes away once its last task has exited, so retry briefly.
func (c *cgroups) remove(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, h := range c.hierarchies {
			var dirs []string
			_ = filepath.WalkDir(filepath.Join(h, c.name), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
			for _, d := range dirs {
				if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
					left = append(left, d)
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cannot remove cgroups %v", left)
		}
		_ = c.killAll(time.Second)
		time.Sleep(50 * time.Millisecond)
	}
}
