// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Rigs of other names may run beside this one (make e2e runs its packages side by side, each with
// a rig of its own). They share the machine-wide things the kubelet changes: the kernel settings
// it sets and the fixed paths it creates. The first rig records what the machine had, the later
// ones take that record over from a live rig, and only the last one to go puts it back.

// otherLiveRigs returns the state of every other rig whose folder sits beside dir (the default:
// /var/lib/<name>) and whose starter still holds its lock.
func otherLiveRigs(dir string) []*state {
	dir = filepath.Clean(dir)
	var out []*state
	for _, st := range readStates(filepath.Join(filepath.Dir(dir), "*.state.json")) {
		if st.Dir != "" && filepath.Clean(st.Dir) != dir && lockHeld(st.Dir) {
			out = append(out, st)
		}
	}
	return out
}

// readStates reads the state files matching glob; those that cannot be read are left out.
func readStates(glob string) []*state {
	paths, _ := filepath.Glob(glob)
	var out []*state
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		st := &state{}
		if json.Unmarshal(b, st) == nil {
			out = append(out, st)
		}
	}
	return out
}

// lockHeld reports whether some process holds the flock of the rig at dir (this one included).
func lockHeld(dir string) bool {
	locksMu.Lock()
	_, mine := locks[lockPath(dir)]
	locksMu.Unlock()
	if mine {
		return true
	}
	f, err := os.Open(lockPath(dir))
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}

// machineRecord is what the machine had before any of the live rigs changed it: the kernel
// settings and the fixed paths that did not exist. A live rig's record wins over what is read
// now, which may already be a running kubelet's.
func machineRecord(dir string) (sysctls map[string]string, created []string) {
	sysctls, created = readSysctls(), missingFixedPaths()
	for _, o := range otherLiveRigs(dir) {
		if o.Sysctls != nil {
			sysctls = o.Sysctls
		}
		for _, p := range o.Created {
			if !slices.Contains(created, p) {
				created = append(created, p)
			}
		}
	}
	return sysctls, created
}

// PackageRigName is the rig name of a test binary when each package has a rig of its own:
// DefaultName, a dash and the package's name (go test names its binary <package>.test), then the
// row's letters and digits when row is set (PROBESHIM_ROW), so that one package of two rows can run
// at once (make e2e's lanes): probeshim-rig-node-k135c17.
func PackageRigName(testBinary, row string) string {
	keep := func(dash bool) func(rune) rune {
		return func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				return r
			case dash:
				return '-'
			}
			return -1
		}
	}
	name := DefaultName + "-" + strings.Map(keep(true), strings.ToLower(strings.TrimSuffix(filepath.Base(testBinary), ".test")))
	if tag := strings.Map(keep(false), strings.ToLower(row)); tag != "" {
		name += "-" + tag
	}
	return name
}

// Names lists the rigs whose state files sit in the default place (/var/lib): the default one
// and those of PackageRigName, live or left behind.
func Names() []string {
	var out []string
	for _, st := range readStates(filepath.Join(rigsHome, DefaultName+"*.state.json")) {
		if st.Name != "" {
			out = append(out, st.Name)
		}
	}
	return out
}

// RemoveIdleLocks removes the lock files of the package rigs (PackageRigName) that no process
// holds: a run of side-by-side packages leaves one per package. Only while no rig starts (make
// rig-down): a start that opened a lock file just before it goes would hold a lock nobody else sees.
func RemoveIdleLocks() {
	locks, _ := filepath.Glob(filepath.Join(rigsHome, DefaultName+"-*.lock"))
	for _, l := range locks {
		if rigDir := strings.TrimSuffix(l, ".lock"); !lockHeld(rigDir) {
			_ = os.Remove(l)
		}
	}
}
