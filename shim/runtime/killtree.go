// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxDescendants bounds the walk of a process tree.
const maxDescendants = 4096

// pidRef is a process found below a timed-out exec, held by a pidfd: a
// signal through the pidfd reaches that process or, once it is gone, nothing;
// never another process that was given the same PID since.
type pidRef struct{ pid, fd int }

// killDescendants SIGKILLs every process below root (runc signals only the
// exec process itself; its children would be left behind, adopted by the
// container's init). It returns how many it signalled. Without pidfds
// (Linux before 5.3) it kills none: a PID alone may have been reused.
//
// root is the exec's PID as the runtime reported it, so the exec may have
// exited and its PID gone to another process by now. sibling (the container's
// first process; 0: none) anchors it: an exec process and its container's
// first process are both children of the container's shim, so root is walked
// only while, with its pidfd open, it has the parent sibling has.
func killDescendants(root, sibling int) (int, error) {
	if err := killableRoot(root); err != nil {
		return 0, err
	}
	refs, err := descendants(root, sibling)
	defer closeRefs(refs)
	n := 0
	for _, r := range refs {
		if unix.PidfdSendSignal(r.fd, unix.SIGKILL, nil, 0) == nil {
			n++
		}
	}
	return n, err
}

// killableRoot refuses a root whose descendants include this service: PID 1,
// the service itself and its ancestors. The PID comes from the runtime; a
// wrong one (a runtime's bug, a fake in a test) must never make the service
// kill every process on the host.
func killableRoot(root int) error {
	if root <= 1 {
		return fmt.Errorf("refusing to kill the processes below PID %d", root)
	}
	for pid, n := os.Getpid(), 0; pid > 1 && n < 64; n++ {
		if pid == root {
			return fmt.Errorf("refusing to kill the processes below PID %d, an ancestor of this process", root)
		}
		ppid, _, err := procStatus(pid)
		if err != nil {
			return fmt.Errorf("refusing to kill the processes below PID %d: %w", root, err)
		}
		pid = ppid
	}
	return nil
}

func closeRefs(refs []pidRef) {
	for _, r := range refs {
		unix.Close(r.fd)
	}
}

// descendants finds every process below root through
// /proc/PID/task/TID/children and opens a pidfd on each. A PID read there is
// only a number by the time it is opened: the process may have exited and
// the PID gone to any process of the host. So each is kept only if, with its
// pidfd open, /proc says it is still a child of the parent it was listed
// under and in the exec's PID namespace or one below (NSpid at least as
// deep); and a parent's list counts only if the parent is still alive after
// it was read (a PID is not reused before its process is reaped). The caller
// closes the pidfds.
func descendants(root, sibling int) ([]pidRef, error) {
	fd, err := unix.PidfdOpen(root, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("pidfd_open: %w (Linux 5.3 or later is needed to kill what an exec started)", err)
		}
		return nil, nil // gone already
	}
	defer unix.Close(fd)
	ppid, depth, err := procStatus(root)
	if err == nil && sibling > 0 && !sameParent(ppid, sibling) {
		return nil, fmt.Errorf("PID %d is no longer the exec: its parent %d is not its container's shim", root, ppid)
	}
	// Alive after /proc was read: what was read is the process behind the pidfd.
	if err != nil || !alive(fd) {
		return nil, nil
	}

	var out []pidRef
	type parent struct{ pid, fd int }
	queue := []parent{{root, fd}}
	seen := map[int]bool{root: true}
	for len(queue) > 0 && len(out) < maxDescendants {
		p := queue[0]
		queue = queue[1:]
		kids := children(p.pid)
		if !alive(p.fd) {
			continue // the list may be another process's that took the PID
		}
		for _, k := range kids {
			if seen[k] || len(out) >= maxDescendants {
				continue
			}
			seen[k] = true
			if r, ok := openChild(k, p.pid, depth); ok {
				out = append(out, r)
				queue = append(queue, parent(r))
			}
		}
	}
	return out, nil
}

// sameParent reports whether sibling's parent is ppid, and not PID 1 (a
// shim that died leaves its processes to init, whose other children are
// anyone's).
func sameParent(ppid, sibling int) bool {
	sp, _, err := procStatus(sibling)
	return err == nil && ppid > 1 && sp == ppid
}

// openChild opens a pidfd on pid and keeps it if the process behind it is a
// child of parent at a PID-namespace depth of at least depth.
func openChild(pid, parent, depth int) (pidRef, bool) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return pidRef{}, false
	}
	// The pidfd was opened first: if /proc now shows another process, the
	// one behind the pidfd has exited and a signal to it does nothing.
	ppid, d, err := procStatus(pid)
	if err != nil || ppid != parent || d < depth {
		unix.Close(fd)
		return pidRef{}, false
	}
	return pidRef{pid, fd}, true
}

// alive reports whether the process behind a pidfd has not been reaped.
func alive(fd int) bool { return unix.PidfdSendSignal(fd, 0, nil, 0) == nil }

// children lists the children of every thread of pid.
func children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

func procStatus(pid int) (ppid, depth int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(b)
}

// parseStatus reads the parent PID and the PID-namespace depth (the number
// of NSpid entries: 1 in the host's namespace, 2 in a container's) from
// /proc/PID/status. /proc/PID/ns/pid would name the namespace itself, but
// reading it needs CAP_SYS_PTRACE, which the service does not have.
func parseStatus(b []byte) (ppid, depth int, err error) {
	ppid, depth = -1, 0
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch string(k) {
		case "PPid":
			if ppid, err = strconv.Atoi(string(bytes.TrimSpace(v))); err != nil {
				return 0, 0, fmt.Errorf("PPid: %w", err)
			}
		case "NSpid":
			depth = len(bytes.Fields(v))
		}
	}
	if ppid < 0 || depth == 0 {
		return 0, 0, errors.New("no PPid or NSpid in /proc/PID/status")
	}
	return ppid, depth, nil
}
