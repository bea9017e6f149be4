// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package inroot reads a small file inside a container's root filesystem as the container's process
// would, without starting a process in the container: the path is resolved within the root (no
// symlink or ".." leaves it, no /proc magic link is followed), the reading thread has the
// container process's file-system identity (uid, gid, supplementary groups) and effective
// capabilities and no other, and only regular files of ordinary file systems are opened, so a
// FIFO or a device never blocks or has side effects, and no kernel file (/proc, /sys), whose
// answer depends on who asks, is read.
//
// The identity is switched on one locked OS thread with raw per-thread syscalls (setfsuid,
// setfsgid, setgroups, capset), never the process-wide wrappers, and restored afterwards; a
// thread whose identity cannot be restored is never reused: its goroutine ends without
// unlocking it, which makes the Go runtime end the thread.
package inroot

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"github.com/cyphar/filepath-securejoin/pathrs-lite/procfs"
	"golang.org/x/sys/unix"
)

// Creds is the identity a read runs as. UID and GID are as the kernel sees them (host IDs; a
// container in a user namespace has its IDs mapped by the caller).
type Creds struct {
	UID    uint32
	GID    uint32
	Groups []uint32
	// Caps is the effective capability set of the container's process (bit n is capability n,
	// as in CapEff of /proc/<pid>/status): the thread reads with these and no other, so the
	// service's own CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_DAC_OVERRIDE never widen what a
	// container may read. Zero for a non-root user (its process lost every capability at
	// execve) and for a container in a user namespace (its capabilities hold there, not on the
	// host).
	Caps uint64
}

// CapBit is the Caps bit of capability c (unix.CAP_*).
func CapBit(c int) uint64 { return 1 << uint(c) }

// Error is what `cat` would report of a file it cannot read (it exits 1): the file is missing, a
// directory, not readable for the user, not a regular file, or its path does not resolve. Its
// text is cat's: "cat: <path>: <reason>".
type Error struct {
	Path string
	Err  error
}

func (e *Error) Error() string { return "cat: " + e.Path + ": " + reason(e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// ErrNotPermitted: the service may not take the user's identity or open the container's root
// (it lacks CAP_SETUID, CAP_SETGID or CAP_SYS_PTRACE, or CAP_DAC_OVERRIDE for a container that
// has it, or a seccomp filter refuses setfsuid, setgroups or capset). Nothing was read.
var ErrNotPermitted = errors.New("not permitted to read as the container's user")

// ErrNotRegular: the path names something other than a regular file or a directory (a FIFO,
// socket or device), which is never opened.
var ErrNotRegular = errors.New("not a regular file")

// ErrKernelFS: the path names a file of a kernel file system (procfs, sysfs and the like: see
// kernelFS), which is never opened: what such a file shows depends on who reads it and how
// (another process's memory map, kernel addresses), more than a file's owner and mode say.
var ErrKernelFS = errors.New("on a kernel file system (/proc, /sys), not read without exec")

// kernelFS are the file systems whose files the kernel makes up for each reader.
var kernelFS = map[int64]string{
	unix.PROC_SUPER_MAGIC: "proc", unix.SYSFS_MAGIC: "sysfs", unix.DEBUGFS_MAGIC: "debugfs",
	unix.TRACEFS_MAGIC: "tracefs", unix.SECURITYFS_MAGIC: "securityfs", unix.SELINUX_MAGIC: "selinuxfs",
	unix.SMACK_MAGIC: "smackfs", unix.BPF_FS_MAGIC: "bpf", unix.EFIVARFS_MAGIC: "efivarfs",
	unix.PSTOREFS_MAGIC: "pstore", unix.CGROUP_SUPER_MAGIC: "cgroup", unix.CGROUP2_SUPER_MAGIC: "cgroup2",
	unix.BINFMTFS_MAGIC: "binfmt_misc",
}

// reason is err as strerror(3) writes it: "No such file or directory".
func reason(err error) string {
	s := err.Error()
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// ReadFile reads at most limit bytes of the regular file at path, resolved inside root (a
// directory file descriptor, O_PATH is enough) as if root were "/", as creds. A file the user
// cannot read returns an *Error; any other error (the identity could not be switched) means the
// read was not attempted as asked. ReadFile blocks until the read ends; callers bound it.
func ReadFile(root *os.File, path string, creds Creds, limit int) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	warmProcfs()
	resc := make(chan result, 1)
	go func() {
		// A goroutine of its own: if the thread cannot be restored, the goroutine ends with it
		// locked and the runtime ends the thread.
		runtime.LockOSThread()
		var res result
		saved, err := become(creds)
		if err == nil {
			res.b, res.err = readAs(root, path, limit)
			err = restore(saved)
			if err == nil {
				runtime.UnlockOSThread()
			}
		} else if restore(saved) == nil {
			runtime.UnlockOSThread()
		}
		if err != nil {
			res = result{err: err}
		}
		resc <- res
	}()
	res := <-resc
	return res.b, res.err
}

// warmProcfs makes filepath-securejoin's private procfs (through which it names what it opened)
// once, with the service's own capabilities: on the reading thread, with the container's, the mount
// is refused and every read would open and check the host's /proc again.
var warmProcfs = sync.OnceFunc(func() {
	if h, err := procfs.OpenProcRoot(); err == nil {
		_ = h.Close() // the cached handle ignores it; an uncached one is closed
	}
})

// readAs opens and reads the file with the thread's current identity. The path is resolved in the
// root by openInRoot.
func readAs(root *os.File, path string, limit int) ([]byte, error) {
	h, err := openInRoot(root, path)
	if err != nil {
		return nil, pathError(path, err)
	}
	defer h.Close()
	// Not in the library: which file systems and file types a probe may open at all.
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(h.Fd()), &fs); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	if _, ok := kernelFS[int64(fs.Type)]; ok {
		return nil, &Error{Path: path, Err: ErrKernelFS}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(h.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, &Error{Path: path, Err: unix.EISDIR}
	default:
		return nil, &Error{Path: path, Err: ErrNotRegular}
	}
	// Reopening the O_PATH handle checks read permission on the inode found, for the thread's
	// identity, without resolving the path again. Not pathrs.Reopen: its checks that /proc is not
	// over-mounted (against a runtime's /proc a container controls) cost 15 syscalls a read, and
	// this is the host's /proc, which no tenant mounts over.
	rfd, err := unix.Open("/proc/thread-self/fd/"+strconv.Itoa(int(h.Fd())), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &Error{Path: path, Err: err}
	}
	f := os.NewFile(uintptr(rfd), path)
	defer f.Close()
	b := make([]byte, 0, min(limit, max(int(st.Size), 0)+1, 64<<10))
	b, err = readUpTo(f, b, limit)
	if err != nil {
		return nil, pathError(path, err)
	}
	return b, nil
}

// openInRoot resolves path in root to an O_PATH handle: openat2 with RESOLVE_IN_ROOT (".." and
// absolute symlinks stop at root, as for a process chrooted there) and RESOLVE_NO_MAGICLINKS (no
// /proc/<pid>/root or /proc/self/fd/N jumps out of it). Where the kernel cannot answer that way (no
// openat2 before 5.6 or a seccomp filter refusing it; EAGAIN when a rename or mount elsewhere makes
// it refuse a "..") filepath-securejoin resolves it, as runc and containerd do: its retries and its
// checked walk. Not the library on every read: it also names what it opened through procfs, which
// measured 1.7x the cost of a whole read (BenchmarkReadFile) on the path exec-free probes take.
func openInRoot(root *os.File, path string) (*os.File, error) {
	fd, err := openat2(int(root.Fd()), path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), path), nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.EAGAIN):
		return pathrs.OpenatInRoot(root, path)
	}
	return nil, err
}

// openat2 is unix.Openat2; a test makes it refuse, as an old kernel does, to take the library's way.
var openat2 = unix.Openat2

// pathError is a failed open or read as cat reports it: the errno, whatever the library wrapped
// around it.
func pathError(path string, err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		err = errno
	}
	return &Error{Path: path, Err: err}
}

// readUpTo appends to b what f holds, at most limit bytes in all.
func readUpTo(f io.Reader, b []byte, limit int) ([]byte, error) {
	for len(b) < limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):min(cap(b), limit)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// identity is a thread's file-system identity and capabilities.
type identity struct {
	fsuid, fsgid int
	groups       []uint32
	caps         [2]unix.CapUserData
	capsChanged  bool
}

// dacCaps bypass file permissions; for a read-only open they do the same.
var dacCaps = CapBit(unix.CAP_DAC_OVERRIDE) | CapBit(unix.CAP_DAC_READ_SEARCH)

// become switches the calling (locked) thread to creds and returns what it was. On error the
// caller restores what was returned.
func become(c Creds) (identity, error) {
	var saved identity
	saved.fsuid = setfsuid(-1) // an invalid ID changes nothing and returns the current one
	saved.fsgid = setfsgid(-1)
	groups, err := getgroups()
	if err != nil {
		return identity{fsuid: saved.fsuid, fsgid: saved.fsgid, groups: nil}, err
	}
	saved.groups = groups
	if saved.fsuid < 0 || saved.fsgid < 0 {
		// -EPERM: a seccomp filter refuses the calls; nothing was changed.
		return saved, fmt.Errorf("%w: setfsuid/setfsgid refused", ErrNotPermitted)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &saved.caps[0]); err != nil {
		return saved, fmt.Errorf("%w: capget: %w", ErrNotPermitted, err)
	}
	permitted := uint64(saved.caps[0].Permitted) | uint64(saved.caps[1].Permitted)<<32
	want := c.Caps & permitted
	if c.Caps&dacCaps != 0 && want&dacCaps == 0 {
		// A container that may read any file needs it here too, or a file its cat could read
		// would be refused. CAP_DAC_OVERRIDE does for a read what CAP_DAC_READ_SEARCH does.
		if permitted&CapBit(unix.CAP_DAC_OVERRIDE) == 0 {
			return saved, fmt.Errorf("%w: no CAP_DAC_OVERRIDE to read as a container that bypasses file permissions", ErrNotPermitted)
		}
		want |= CapBit(unix.CAP_DAC_OVERRIDE)
	}
	// The IDs first, while the thread still has CAP_SETUID and CAP_SETGID; then the capabilities.
	if err := setgroups(c.Groups); err != nil {
		return saved, fmt.Errorf("%w: setgroups: %w", ErrNotPermitted, err)
	}
	// The GID before the UID: once the UID is not 0, the thread may lack the capability to change
	// it. Without CAP_SETGID / CAP_SETUID the calls change nothing, silently.
	setfsgid(int(c.GID))
	if got := setfsgid(-1); got != int(c.GID) {
		return saved, fmt.Errorf("%w: setfsgid %d: still %d", ErrNotPermitted, c.GID, got)
	}
	setfsuid(int(c.UID))
	if got := setfsuid(-1); got != int(c.UID) {
		return saved, fmt.Errorf("%w: setfsuid %d: still %d", ErrNotPermitted, c.UID, got)
	}
	// Only the effective set changes: the permitted set stays, so restore may raise them again
	// without any capability.
	caps := saved.caps
	caps[0].Effective, caps[1].Effective = uint32(want), uint32(want>>32)
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return saved, fmt.Errorf("%w: capset: %w", ErrNotPermitted, err)
	}
	saved.capsChanged = true
	return saved, nil
}

// restore puts back the identity become saved and checks that it holds.
func restore(s identity) error {
	var errs []error
	if s.capsChanged {
		// First: changing IDs and groups back needs CAP_SETUID and CAP_SETGID.
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		if err := unix.Capset(&hdr, &s.caps[0]); err != nil {
			errs = append(errs, fmt.Errorf("restore capabilities: %w", err))
		}
	}
	setfsuid(s.fsuid)
	setfsgid(s.fsgid)
	if got := setfsuid(-1); got != s.fsuid {
		errs = append(errs, fmt.Errorf("restore fsuid %d: still %d", s.fsuid, got))
	}
	if got := setfsgid(-1); got != s.fsgid {
		errs = append(errs, fmt.Errorf("restore fsgid %d: still %d", s.fsgid, got))
	}
	if s.groups != nil {
		now, err := getgroups()
		if err == nil && !equalGroups(now, s.groups) {
			if err = setgroups(s.groups); err == nil {
				now, err = getgroups()
			}
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("restore groups: %w", err))
		case !equalGroups(now, s.groups):
			errs = append(errs, fmt.Errorf("restore groups: now %v, want %v", now, s.groups))
		}
	} else {
		errs = append(errs, errors.New("groups unknown"))
	}
	if s.capsChanged {
		// Again: a file-system UID going back to 0 raises the file capabilities, which the
		// service may not have had in its effective set.
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var now [2]unix.CapUserData
		err := unix.Capset(&hdr, &s.caps[0])
		if err == nil {
			err = unix.Capget(&hdr, &now[0])
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("restore capabilities: %w", err))
		case now != s.caps:
			errs = append(errs, fmt.Errorf("restore capabilities: now %+v, want %+v", now, s.caps))
		}
	}
	return errors.Join(errs...)
}

func equalGroups(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The raw syscalls below act on the calling thread only. (syscall.Setgroups and friends change
// every thread of the process, which is what must not happen here.)

func setfsuid(id int) int {
	r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, uintptr(id), 0, 0)
	return int(int32(r))
}

func setfsgid(id int) int {
	r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, uintptr(id), 0, 0)
	return int(int32(r))
}

func setgroups(groups []uint32) error {
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); e != 0 {
		return e
	}
	return nil
}

func getgroups() ([]uint32, error) {
	n, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, 0, 0, 0)
	if e != 0 {
		return nil, e
	}
	groups := make([]uint32, n)
	if n == 0 {
		return groups, nil
	}
	m, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&groups[0])), 0)
	if e != 0 {
		return nil, e
	}
	return groups[:m], nil
}

// OpenProcRoot opens the root directory of process pid as that process sees it (/proc/<pid>/root:
// its mount namespace and root), as an O_PATH descriptor. startTime, when not 0, must be the
// process' start time (see StartTime), so that a pid reused by another process is never taken
// for the container's.
func OpenProcRoot(pid int, startTime uint64) (*os.File, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	if startTime != 0 {
		// Read through the directory just opened: if the process is gone, this fails (ESRCH)
		// rather than read a newer process of the same pid.
		got, err := startTimeAt(dfd)
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		if got != startTime {
			return nil, fmt.Errorf("process %d is not the container's any more (started at %d, not %d)", pid, got, startTime)
		}
	}
	rfd, err := unix.Openat(dfd, "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		// A process of another user, or with capabilities the service lacks: CAP_SYS_PTRACE.
		return nil, fmt.Errorf("%w: open %s/root: %w", ErrNotPermitted, dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s/root: %w", dir, err)
	}
	return os.NewFile(uintptr(rfd), dir+"/root"), nil
}

// StartTime returns the start time of process pid (field 22 of /proc/<pid>/stat, in clock ticks
// since boot), which tells a process from a later one that reuses its pid.
func StartTime(pid int) (uint64, error) {
	dfd, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(dfd)
	return startTimeAt(dfd)
}

func startTimeAt(procDir int) (uint64, error) {
	fd, err := unix.Openat(procDir, "stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(fd), "stat")
	defer f.Close()
	b, err := readUpTo(f, make([]byte, 0, 1024), 4096)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(s[i+1:])
	const startTimeField = 22 - 3 // fields after the name start at field 3
	if len(fields) <= startTimeField {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(fields[startTimeField], 10, 64)
}
