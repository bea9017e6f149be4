// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// state is what the rig writes down before it changes the machine, so that a
// later process can undo it even when the one that brought the rig up was
// killed with -9. It lives beside the rig's folder, not in it, and is removed
// last.
type state struct {
	Name      string     `json:"name"`
	Dir       string     `json:"dir"`
	NetNS     string     `json:"netns"`
	Cgroup    string     `json:"cgroup"`
	Processes []*process `json:"processes"`
	// Sysctls are the values before the kubelet started, restored at teardown.
	Sysctls map[string]string `json:"sysctls"`
	// Created are paths outside Dir that the kubelet or containerd create at
	// fixed places and that did not exist before the rig started.
	Created []string `json:"created"`
	// NetNSDirMounted is true when /run/netns was not a mount before the rig
	// ran `ip netns add` (which makes it one).
	NetNSDirMounted bool `json:"netnsDirMounted"`
	// CNINetwork names the CNI network whose cache entries to delete when
	// /var/lib/cni existed before.
	CNINetwork string `json:"cniNetwork"`
}

func statePath(dir string) string { return filepath.Clean(dir) + ".state.json" }

// StateFile is where a rig with cfg records what it started and changed.
func StateFile(cfg Config) string { return statePath(cfg.withDefaults().Dir) }

func (r *Rig) saveState() error {
	b, err := json.MarshalIndent(r.state, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(r.dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(r.dir))
}

// kubeletSysctls are the kernel settings the kubelet sets when
// protectKernelDefaults is false, with the value it sets and the kernel
// default to restore when the recorded value is the kubelet's own (left
// behind by a run that could not restore it).
var kubeletSysctls = []struct{ name, kubelet, kernelDefault string }{
	{"vm/overcommit_memory", "1", "0"},
	{"vm/panic_on_oom", "0", "0"},
	{"kernel/panic", "10", "0"},
	{"kernel/panic_on_oops", "1", "0"},
	{"kernel/keys/root_maxkeys", "1000000", "1000000"},
	{"kernel/keys/root_maxbytes", "25000000", "25000000"},
}

func readSysctls() map[string]string {
	out := map[string]string{}
	for _, s := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + s.name)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == s.kubelet && v != s.kernelDefault && s.name != "vm/panic_on_oom" {
			v = s.kernelDefault
		}
		out[s.name] = v
	}
	return out
}

func restoreSysctls(vals map[string]string) error {
	var errs []error
	for _, s := range kubeletSysctls {
		v, ok := vals[s.name]
		if !ok {
			v = s.kernelDefault
		}
		if err := os.WriteFile("/proc/sys/"+s.name, []byte(v), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fixedPaths are created by the kubelet and containerd outside the folders
// they are told to use.
var fixedPaths = []string{
	"/var/lib/kubelet/device-plugins/kubelet.sock",
	"/var/lib/kubelet/device-plugins",
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/log/pods",
	"/run/containerd",
	"/var/lib/cni",
}

// missingFixedPaths returns those fixedPaths that do not exist now.
func missingFixedPaths() []string {
	var out []string
	for _, p := range fixedPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

// Teardown undoes everything a rig recorded in the state file beside dir, and
// then removes what it finds under the rig's fixed names even without a state
// file: processes in its cgroups, mounts under dir, its netns. It is safe to
// run any number of times and when nothing is left.
func Teardown(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	st := &state{Name: cfg.Name, Dir: cfg.Dir, NetNS: cfg.NetNS, Cgroup: cfg.Cgroup}
	if b, err := os.ReadFile(statePath(cfg.Dir)); err == nil {
		if err := json.Unmarshal(b, st); err != nil {
			return fmt.Errorf("state file %s: %w", statePath(cfg.Dir), err)
		}
	}
	return teardown(st, nil, cfg.Logf)
}

func teardown(st *state, live []*process, logf func(string, ...any)) error {
	start := time.Now()
	var errs []error
	// The kubelets first, so that they restart nothing; then everything else.
	for _, p := range live {
		if isKubelet(p.Name) {
			p.stopGracefully(0)
		}
	}
	for _, p := range live {
		p.stopGracefully(0)
	}
	for _, p := range st.Processes {
		killRecorded(p.PID, p.Start)
	}
	cg, cgErr := newCgroups(st.Cgroup)
	if cgErr == nil {
		// Shims and containers: they outlive containerd.
		if err := cg.killAll(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	} else {
		errs = append(errs, cgErr)
	}
	if err := unmountUnder(st.Dir); err != nil {
		errs = append(errs, err)
	}
	if cgErr == nil {
		if err := cg.remove(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := deleteNetNS(st.NetNS); err != nil {
		errs = append(errs, err)
	}
	if st.NetNSDirMounted {
		if entries, err := os.ReadDir(netnsDir); err == nil && len(entries) == 0 {
			_ = unmountUnder(netnsDir)
			_ = os.Remove(netnsDir)
		}
	}
	// Leave what others (another containerd or kubelet on the machine) have
	// put there: remove only dead sockets, links into our folder and our CNI
	// cache entries, then the folders the rig created if they are empty.
	removeOwnCaches(st)
	// With another rig still running, its kubelet keeps the kernel settings and the fixed folders:
	// the last rig to go puts them back (see others.go).
	last, err := leaving(st.Dir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/run/containerd"} {
		cleanFixedPath(p, st.Dir, last, contains(st.Created, p))
	}
	if last && contains(st.Created, "/var/lib/cni") {
		cleanFixedPath("/var/lib/cni", st.Dir, true, true)
	}
	if st.Sysctls != nil && last {
		if err := restoreSysctls(st.Sysctls); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeAllOneFS(st.Dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		_ = os.Remove(statePath(st.Dir))
		_ = os.Remove(leavingPath(st.Dir))
	}
	if logf != nil {
		logf("rig: teardown took %s", time.Since(start).Round(time.Millisecond))
	}
	return errors.Join(errs...)
}

func leavingPath(dir string) string { return filepath.Clean(dir) + ".leaving" }

// leaving records that the rig at dir has stopped its processes and says whether it is the last
// rig on the machine: until every other live rig is leaving too, another kubelet still holds the
// kernel settings and the fixed folders. Rigs that go at the same moment decide one after the
// other under a machine-wide lock, so that exactly one of them is the last and puts things back
// (before, two rigs torn down at once each saw the other live, and neither did).
func leaving(dir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(filepath.Dir(filepath.Clean(dir)), ".probeshim-rig-teardown.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return len(otherLiveRigs(dir)) == 0, err
	}
	defer f.Close() // drops the flock
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return len(otherLiveRigs(dir)) == 0, fmt.Errorf("teardown lock: %w", err)
	}
	if err := os.WriteFile(leavingPath(dir), nil, 0o644); err != nil {
		return false, err
	}
	for _, other := range otherLiveRigs(dir) {
		if _, err := os.Stat(leavingPath(other.Dir)); err != nil {
			return false, nil // still running
		}
	}
	return true, nil
}

// removeOwnCaches removes the rig's entries in libcni's cache and its image build folders.
func removeOwnCaches(st *state) {
	if st.CNINetwork != "" {
		// libcni's cache: <network>-<container id>-<ifname>, and the same
		// for the loopback network containerd adds.
		// Only this network's: another rig's name may start with this one's.
		matches, _ := filepath.Glob("/var/lib/cni/results/" + st.CNINetwork + "-*")
		for _, m := range matches {
			rest := strings.TrimPrefix(filepath.Base(m), st.CNINetwork+"-")
			if !cniCacheEntry.MatchString(rest) {
				continue
			}
			_ = os.Remove(m)
			_ = os.Remove("/var/lib/cni/results/cni-loopback-" + rest[:strings.LastIndexByte(rest, '-')] + "-lo")
		}
	}
	if old, _ := filepath.Glob(filepath.Join(os.TempDir(), buildDirPrefix+st.Name+"-*")); st.Name != "" && len(old) > 0 {
		for _, d := range old {
			if !tempSuffix.MatchString(strings.TrimPrefix(filepath.Base(d), buildDirPrefix+st.Name+"-")) {
				continue // another rig's, whose name starts with this one's
			}
			_ = os.RemoveAll(d)
		}
	}
}

var (
	// cniCacheEntry is the rest of a libcni cache file's name after "<network>-": a container
	// ID and an interface.
	cniCacheEntry = regexp.MustCompile(`^[0-9a-f]{64}-[^-]+$`)
	// tempSuffix is what os.MkdirTemp puts in place of its "*": digits.
	tempSuffix = regexp.MustCompile(`^[0-9]+$`)
)

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// cleanFixedPath removes, below p, unix sockets nobody listens on any more and
// symlinks into dir; when last (no other rig lives), also every folder left
// empty, and p itself when removeTop is set too (the rig created it). While
// another rig lives, an empty folder may be in use: e2e/packaged's container
// binds /run/containerd/fifo, and its execs fail for good once the host's
// folder is removed from under the bind.
func cleanFixedPath(p, dir string, last, removeTop bool) {
	var walk func(string) bool // reports whether the path is gone
	walk = func(path string) bool {
		st, err := os.Lstat(path)
		if err != nil {
			return errors.Is(err, fs.ErrNotExist)
		}
		switch {
		case st.Mode()&fs.ModeSocket != 0:
			if staleSocket(path) {
				return os.Remove(path) == nil
			}
		case st.Mode()&fs.ModeSymlink != 0:
			if t, err := os.Readlink(path); err == nil && strings.HasPrefix(t, dir+"/") {
				return os.Remove(path) == nil
			}
		case st.IsDir():
			entries, _ := os.ReadDir(path)
			empty := true
			for _, e := range entries {
				if !walk(filepath.Join(path, e.Name())) {
					empty = false
				}
			}
			if empty && last && (path != p || removeTop) {
				return os.Remove(path) == nil
			}
		}
		return false
	}
	walk(p)
}

// staleSocket reports whether nothing accepts connections on a unix socket.
func staleSocket(path string) bool {
	c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist)
	}
	c.Close()
	return false
}
