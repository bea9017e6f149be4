// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	capability "github.com/containerd/containerd/v2/pkg/cap"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/probeshim/probeshim/prober"
	"github.com/probeshim/probeshim/shim/inroot"
)

// maxReadsInFlight bounds the file reads that still run: a read stuck in a hung file system
// (a FUSE or NFS mount in the container) keeps its thread until the kernel lets go.
const maxReadsInFlight = 64

var _ prober.FileReader = (*Client)(nil)

// ReadFile reads at most limit bytes of the regular file at path inside the container, as `cat
// <path>` run in it would: resolved in the container's root and mount namespace (those of its
// init process; no symlink or ".." leaves the root), with the file-system identity of the
// container's user (uid, gid and supplementary groups of its process spec, mapped to the host
// when it has a user namespace) and the capabilities an exec of cat would have, no other. Files
// of kernel file systems (/proc, /sys) are not read. No process is started. A file cat could not read gives an error wrapping
// prober.ErrFileUnreadable whose text is cat's; one never read without exec (of a kernel file
// system, a FIFO, socket or device) an error wrapping prober.ErrReadRefused with cat-like text
// (the probe cannot run: cat would have read it); after timeout the error wraps
// prober.ErrExecTimeout (the read itself goes on in the background, bounded in number); other
// errors wrap ErrNotFound (no such container or task) or ErrUnavailable.
func (c *Client) ReadFile(ctx context.Context, containerID, path string, limit int, timeout time.Duration) ([]byte, error) {
	tgt, cached, err := c.execTarget(ctx, containerID)
	if err != nil {
		return nil, err
	}
	root, err := c.openRoot(tgt)
	if err != nil && cached {
		// The cached task may be gone: load the container's task afresh once.
		c.forgetTarget(containerID)
		if tgt, _, err = c.execTarget(ctx, containerID); err != nil {
			return nil, err
		}
		root, err = c.openRoot(tgt)
	}
	if errors.Is(err, inroot.ErrNotPermitted) {
		return nil, c.unsupported(err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: root of container %s: %w", ErrNotFound, containerID, err)
	}
	select {
	case c.reads <- struct{}{}:
	default:
		root.Close()
		return nil, fmt.Errorf("%w: %d earlier file reads have not returned", prober.ErrExecTimeout, maxReadsInFlight)
	}
	type result struct {
		b   []byte
		err error
	}
	resc := make(chan result, 1)
	go func() {
		defer func() { <-c.reads }()
		defer root.Close()
		b, err := inroot.ReadFile(root, path, tgt.fsCreds, limit)
		resc <- result{b, err}
	}()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case r := <-resc:
		var ie *inroot.Error
		if errors.As(r.err, &ie) {
			return nil, catError(ie)
		}
		if errors.Is(r.err, inroot.ErrNotPermitted) {
			return nil, c.unsupported(r.err)
		}
		if r.err != nil {
			return nil, fmt.Errorf("read %s in container %s: %w", path, containerID, r.err)
		}
		return r.b, nil
	case <-timer:
		return nil, fmt.Errorf("%w: reading %s in container %s after %s", prober.ErrExecTimeout, path, containerID, timeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s in container %s: %w", path, containerID, ctx.Err())
	}
}

// unsupported says, once, that exec-free probes run as execs on this node, and returns the error
// that makes the engine run them so.
func (c *Client) unsupported(err error) error {
	c.readWarn.Do(func() {
		c.log.WithError(err).Warn("exec-free probes run as execs: the service may not read files as a container's user " +
			"(it needs CAP_SYS_PTRACE, CAP_SETUID, CAP_SETGID and CAP_DAC_OVERRIDE, and setfsuid, setfsgid, setgroups, " +
			"capset and openat2 allowed; see docs/concepts/exec-free-probes.md)")
	})
	return fmt.Errorf("%w: %w", prober.ErrReadUnsupported, err)
}

// openRoot opens the root of the container's init process, checking that the pid is still
// that process.
func (c *Client) openRoot(tgt *execTarget) (*os.File, error) {
	pid := int(tgt.task.Pid())
	if pid <= 0 {
		return nil, errors.New("task has no pid")
	}
	st := tgt.startTime.Load()
	if st == 0 {
		got, err := inroot.StartTime(pid)
		if err != nil {
			return nil, err
		}
		// The first reader records the start time; until then a pid reuse cannot be told apart,
		// which is why the tracker forgets a target as soon as its task exits.
		tgt.startTime.CompareAndSwap(0, got)
		st = tgt.startTime.Load()
	}
	return inroot.OpenProcRoot(pid, st)
}

// catError is the error of a file cat could not read, the probe's result, or of one never read
// without exec, which the probe cannot run on.
func catError(ie *inroot.Error) error {
	if errors.Is(ie, inroot.ErrKernelFS) || errors.Is(ie, inroot.ErrNotRegular) {
		return refused{ie}
	}
	return unreadable{ie}
}

// unreadable is a file cat could not read: the probe's result, not a probe error.
type unreadable struct{ err *inroot.Error }

func (u unreadable) Error() string { return u.err.Error() }

func (u unreadable) Unwrap() []error { return []error{u.err, prober.ErrFileUnreadable} }

// refused is a file never read without exec: cat might have read it (or blocked on it), so its
// refusal is no result of the probe but a probe error.
type refused struct{ err *inroot.Error }

func (r refused) Error() string { return r.err.Error() }

func (r refused) Unwrap() []error { return []error{r.err, prober.ErrReadRefused} }

// fsCredsOf is the identity of a process the container's spec starts (as an exec of cat would
// be): its user's IDs, as the host sees them, and the effective capabilities execve leaves it.
func fsCredsOf(spec *specs.Spec) inroot.Creds {
	u := spec.Process.User
	var uidMap, gidMap []specs.LinuxIDMapping
	if spec.Linux != nil {
		uidMap, gidMap = spec.Linux.UIDMappings, spec.Linux.GIDMappings
	}
	creds := inroot.Creds{UID: mapID(u.UID, uidMap), GID: mapID(u.GID, gidMap)}
	for _, g := range u.AdditionalGids {
		creds.Groups = append(creds.Groups, mapID(g, gidMap))
	}
	c := spec.Process.Capabilities
	if c == nil || len(uidMap) > 0 {
		// In a user namespace the container's capabilities hold there only: on the host it has none.
		return creds
	}
	names := c.Ambient // what a non-root process keeps across execve
	if u.UID == 0 {
		// Root gets its bounding set (and what it inherits) at execve.
		names = slices.Concat(c.Bounding, c.Inheritable, c.Ambient)
	}
	creds.Caps = capBits(names)
	return creds
}

// capNumbers maps capability names (CAP_CHOWN) to their numbers.
var capNumbers = func() map[string]int {
	m := map[string]int{}
	for i, name := range capability.Known() {
		m[name] = i
	}
	return m
}()

// capBits is the capability set of names; names this build does not know are left out (a
// capability newer than the build's list grants no file access).
func capBits(names []string) uint64 {
	var bits uint64
	for _, n := range names {
		if i, ok := capNumbers[n]; ok {
			bits |= inroot.CapBit(i)
		}
	}
	return bits
}

// overflowID is what the kernel shows for an ID without a mapping (and nobody may own a file as).
const overflowID = 65534

// mapID maps a container ID to the host through a user namespace's mappings; without mappings
// the IDs are the host's.
func mapID(id uint32, mappings []specs.LinuxIDMapping) uint32 {
	if len(mappings) == 0 {
		return id
	}
	for _, m := range mappings {
		if id >= m.ContainerID && id-m.ContainerID < m.Size {
			return m.HostID + (id - m.ContainerID)
		}
	}
	return overflowID
}
