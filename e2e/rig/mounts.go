// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package rig

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

type mountEntry struct {
	point  string
	fstype string
}

// readMountInfo parses /proc/self/mountinfo in mount order.
func readMountInfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mountEntry{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return out, s.Err()
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder lists mount points at or below dir, the most recent first, which
// is an order that unmounts children before their parents.
func mountsUnder(dir string) ([]string, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	var out []string
	for i := len(mounts) - 1; i >= 0; i-- {
		p := mounts[i].point
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, nil
}

// unmountUnder unmounts everything at or below dir: containerd's rootfs and
// shm mounts, the pod netns bind mounts, the kubelet's volume mounts and its
// self-bind of its root dir. Mounts stacked on one point need several passes.
func unmountUnder(dir string) error {
	for pass := 0; pass < 20; pass++ {
		points, err := mountsUnder(dir)
		if err != nil || len(points) == 0 {
			return err
		}
		for _, p := range points {
			if err := unix.Unmount(p, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				_ = unix.Unmount(p, unix.MNT_DETACH)
			}
		}
	}
	left, _ := mountsUnder(dir)
	if len(left) > 0 {
		return fmt.Errorf("still mounted under %s: %v", dir, left)
	}
	return nil
}

// removeAllOneFS is os.RemoveAll that refuses to cross into another file
// system: if an unmount failed, it must not delete what is mounted there.
func removeAllOneFS(dir string) error {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var walk func(p string) error
	walk = func(p string) error {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st.Dev != root.Dev {
			return fmt.Errorf("%s is on another file system (still mounted?): not removing it", p)
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if err := walk(filepath.Join(p, e.Name())); err != nil {
					return err
				}
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return walk(dir)
}
